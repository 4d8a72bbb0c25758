import WaybillDomain

// The request bodies' JSON field names and types (SPEC §2), read by `BodyFields` instead of
// `Decodable` (docs/BENCHMARKS.md: "JSONDecoder in the write path"). Fields are read in the order
// the synthesized `Decodable` initializers read them (their `CodingKeys` order: `stages` before
// `driver_id`), so a body with several faults reports the same one first.

extension CreateOrderRequest: JSONBodyDecodable {
    init(body: BodyFields) throws(BodyError) {
        title = try body.string("title")
        notes = try body.optionalString("notes")
        stages = try body.optionalObjects("stages", StageRequest.init(body:))
        driverID = try body.optionalInt64("driver_id")
    }
}

extension PatchOrderRequest: JSONBodyDecodable {
    init(body: BodyFields) throws(BodyError) {
        title = try body.optionalString("title")
        notes = try body.optionalString("notes")
        stages = try body.optionalObjects("stages", StageRequest.init(body:))
    }
}

extension StageRequest: JSONBodyDecodable {
    init(body: BodyFields) throws(BodyError) {
        id = try body.optionalInt64("id")
        kind = try body.value(StageKind.self, "kind")
        address = try body.string("address")
        plannedAt = try body.optionalString("planned_at")
    }
}

extension StatusRequest: JSONBodyDecodable {
    init(body: BodyFields) throws(BodyError) {
        status = try body.value(OrderStatus.self, "status")
    }
}

extension AssignRequest: JSONBodyDecodable {
    init(body: BodyFields) throws(BodyError) {
        driverID = try body.int64("driver_id")
    }
}

extension DocumentRequest: JSONBodyDecodable {
    init(body: BodyFields) throws(BodyError) {
        name = try body.string("name")
        kind = try body.string("kind")
    }
}

extension LoginRequest: JSONBodyDecodable {
    init(body: BodyFields) throws(BodyError) {
        email = try body.string("email")
        password = try body.string("password")
        role = try body.optionalValue(Role.self, "role")
    }
}
