print("waybill")
