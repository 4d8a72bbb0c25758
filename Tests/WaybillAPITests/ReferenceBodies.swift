import Foundation
import WaybillDomain

@testable import WaybillAPI

/// The request body types as they were before `JSONReader` (`Decodable`, read by `JSONDecoder`),
/// with the same property order and coding keys: the reference `RequestBodyDecodingTests` holds
/// the new reading to.
enum ReferenceBodies {
    static let kinds = ["create", "patch", "status", "assign", "document", "login"]

    /// What `JSONCoding.decode` did: an empty body read as `null`.
    static func decode<T: Decodable>(_ type: T.Type, from body: [UInt8]) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(body.isEmpty ? Array("null".utf8) : body))
    }

    struct Create: Decodable {
        var title: String
        var notes: String?
        var driverID: Int64?
        var stages: [Stage]?
        enum CodingKeys: String, CodingKey { case title, notes, stages, driverID = "driver_id" }
        var request: CreateOrderRequest {
            CreateOrderRequest(title: title, notes: notes, driverID: driverID, stages: stages?.map(\.request))
        }
    }

    struct Patch: Decodable {
        var title: String?
        var notes: String?
        var stages: [Stage]?
        var request: PatchOrderRequest { PatchOrderRequest(title: title, notes: notes, stages: stages?.map(\.request)) }
    }

    struct Stage: Decodable {
        var id: Int64?
        var kind: StageKind
        var address: String
        var plannedAt: String?
        enum CodingKeys: String, CodingKey { case id, kind, address, plannedAt = "planned_at" }
        var request: StageRequest { StageRequest(id: id, kind: kind, address: address, plannedAt: plannedAt) }
    }

    struct Status: Decodable {
        var status: OrderStatus
        var request: StatusRequest { StatusRequest(status: status) }
    }

    struct Assign: Decodable {
        var driverID: Int64
        enum CodingKeys: String, CodingKey { case driverID = "driver_id" }
        var request: AssignRequest { AssignRequest(driverID: driverID) }
    }

    struct Document: Decodable {
        var name: String
        var kind: String
        var request: DocumentRequest { DocumentRequest(name: name, kind: kind) }
    }

    struct Login: Decodable {
        var email: String
        var password: String
        var request: LoginRequest { LoginRequest(email: email, password: password) }
    }
}
