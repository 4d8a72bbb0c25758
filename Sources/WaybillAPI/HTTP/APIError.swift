import Foundation
import WaybillDomain
import WaybillStorage

/// An error as the client sees it: status, stable code, human message (SPEC §2).
///
/// This is the one place that knows status codes: handlers throw domain, storage and decoding
/// errors, and `init(_:)` maps them. A client mistake that lands in `internal` is a bug.
struct APIError: Error, Equatable {
    var status: Int
    var code: String
    var message: String
    /// Seconds for a `Retry-After` header (503 answers the client should simply retry).
    var retryAfter: Int?

    init(_ status: Int, _ code: String, _ message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    static let unauthenticated = APIError(401, "not_authenticated", "Log in first: send Authorization: Bearer <token>.")
    static let notFound = APIError(404, "not_found", "No such order.")
    static let dispatcherOnly = APIError(403, "forbidden", "Only a dispatcher can do this.")
    static let noCompany = APIError(403, "no_company", "Your account belongs to no company.")
    static let overloaded = APIError(503, "overloaded", "Too many logins at once; try again in a second.", retryAfter: 1)
    static let `internal` = APIError(500, "internal_error", "Something went wrong on our side.")

    /// Whether the error came from the server rather than the client (logged with detail).
    /// An overload refusal is expected under a flood and not logged line by line.
    var isServerFault: Bool { status >= 500 && code != "overloaded" }

    init(_ error: any Error) {
        switch error {
        case let api as APIError:
            self = api
        case let rule as OrderRuleViolation:
            self = Self.map(rule)
        case let failed as PreconditionFailed:
            // `order_replaced`: `If-Order-Created` named another order (the id was given again after
            // a restore), so an app can say that rather than "someone changed it first".
            self = APIError(412, failed.anotherOrder ? "order_replaced" : "precondition_failed", failed.description)
        case let invalid as ValidationError:
            self = APIError(422, "validation_error", invalid.description)
        case let body as BodyError:
            self = Self.map(body)
        case let decoding as DecodingError:
            self = Self.map(decoding)
        case StoreError.notFound:
            self = .notFound
        case is KeyStretchingPool.Overloaded:
            self = .overloaded
        case StoreError.conflict:
            // The store's text names tables, columns or constraints: never shown to clients.
            self = APIError(409, "conflict", "That conflicts with an existing record.")
        case StoreError.unavailable:
            self = APIError(503, "store_unavailable", "The store is not available; try again shortly.")
        default:
            self = .internal
        }
    }

    private static func map(_ rule: OrderRuleViolation) -> APIError {
        switch rule {
        case .invalidTransition, .orderClosed:
            APIError(409, "invalid_transition", rule.description)
        case .stageAlreadyCompleted, .tooManyDocuments:
            APIError(409, "conflict", rule.description)
        case .roleNotAllowed:
            APIError(403, "forbidden", rule.description)
        case .notAssignedDriver:
            .notFound  // a driver never learns that another driver's order exists
        case .stageNotFound:
            APIError(404, "not_found", rule.description)
        }
    }

    /// The same words `map(_: DecodingError)` gives for the matching `DecodingError`.
    private static func map(_ error: BodyError) -> APIError {
        switch error {
        case .malformed: APIError(400, "malformed_json", "The body is not valid JSON.")
        case .notAnObject: APIError(400, "invalid_field", "The body must be a JSON object.")
        case .missing(let path): APIError(400, "missing_field", "\(path) is required.")
        case .wrongType(let path, let expected): APIError(400, "invalid_field", "\(path) must be \(expected.phrase).")
        case .invalidValue(let path): APIError(400, "invalid_field", "\(path) has an invalid value.")
        }
    }

    /// Request bodies no longer go through `JSONDecoder` (`BodyError` above); this stays for any
    /// `Decodable` a handler might still use, and is the reference the body decoding tests compare to.
    private static func map(_ error: DecodingError) -> APIError {
        func field(_ path: [any CodingKey]) -> String {
            path.isEmpty ? "body" : path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return APIError(400, "malformed_json", "The body is not valid JSON.")
        case .dataCorrupted(let context):
            return APIError(400, "invalid_field", "\(field(context.codingPath)) has an invalid value.")
        case .keyNotFound(let key, let context):
            return APIError(400, "missing_field", "\(field(context.codingPath + [key])) is required.")
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let what = context.codingPath.isEmpty ? "The body must be a JSON object." : "\(field(context.codingPath)) must be \(describe(type))."
            return APIError(400, "invalid_field", what)
        @unknown default:
            return APIError(400, "malformed_json", "The body is not valid JSON.")
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int64.Type, is Int.Type: "an integer"
        case is Bool.Type: "true or false"
        case is [Any].Type: "an array"
        default: "of a different type"
        }
    }
}
