import WaybillDomain

// The order answers written straight into bytes (see `JSONWritable`): the same keys, in the sorted
// order `JSONEncoder` with `.sortedKeys` gives, the same values as the `Encodable` conformances in
// OrderJSON.swift. `OrderJSONWriterTests` holds the two byte-identical.

extension OrderSummaryJSON: JSONWritable {
    func write(to json: inout JSONByteWriter) {
        json.object { json in writeMembers(to: &json, detail: nil) }
    }

    /// The summary's members, with the detail's own (`documents`, `notes`, `stages`) merged into
    /// their sorted places when `detail` is given.
    func writeMembers(to json: inout JSONByteWriter, detail: Order?) {
        json.key("created_at")
        json.date(summary.createdAt)
        if let detail {
            json.key("documents")
            json.array(detail.documents) { json, document in DocumentJSON(document: document).write(to: &json) }
        }
        json.key("driver_id")
        json.int(summary.driverID?.rawValue)
        json.key("id")
        json.int(summary.id.rawValue)
        if let detail {
            json.key("notes")
            json.string(detail.notes)
        }
        json.key("number")
        json.string(summary.number)
        json.key("seen")
        if let receipt = summary.seen { ReceiptJSON(receipt: receipt).write(to: &json) } else { json.null() }
        if let detail {
            json.key("stages")
            json.array(detail.stages) { json, stage in StageJSON(stage: stage).write(to: &json) }
        }
        json.key("status")
        json.string(summary.status.rawValue)
        json.key("title")
        json.string(summary.title)
        json.key("updated_at")
        json.date(summary.updatedAt)
        json.key("version")
        json.int(summary.version)
    }
}

extension OrderDetailJSON: JSONWritable {
    func write(to json: inout JSONByteWriter) {
        json.object { json in OrderSummaryJSON(summary: order.summary).writeMembers(to: &json, detail: order) }
    }
}

extension ReceiptJSON: JSONWritable {
    func write(to json: inout JSONByteWriter) {
        json.object { json in
            json.key("at")
            json.date(receipt.at)
            json.key("driver_id")
            json.int(receipt.driverID.rawValue)
            json.key("version")
            json.int(receipt.version)
        }
    }
}

extension StageJSON: JSONWritable {
    func write(to json: inout JSONByteWriter) {
        json.object { json in
            json.key("address")
            json.string(stage.address)
            json.key("completed_at")
            json.date(stage.completedAt)
            json.key("id")
            json.int(stage.id?.rawValue)
            json.key("kind")
            json.string(stage.kind.rawValue)
            json.key("planned_at")
            json.date(stage.plannedAt)
            json.key("position")
            json.int(stage.position)
        }
    }
}

extension DocumentJSON: JSONWritable {
    func write(to json: inout JSONByteWriter) {
        json.object { json in
            json.key("created_at")
            json.date(document.createdAt)
            json.key("id")
            json.int(document.id?.rawValue)
            json.key("kind")
            json.string(document.kind)
            json.key("name")
            json.string(document.name)
        }
    }
}
