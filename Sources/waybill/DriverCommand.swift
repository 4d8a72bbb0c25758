// TEMPORARY until the WaybillClient library lands; replaced by the real terminal app.
enum DriverCommand {
    static let help = "Usage: waybill driver --server URL --email E --password P [--json]"
    static func run(_ argv: [String]) async throws {
        throw Arguments.Problem(description: "the driver app is not built yet")
    }
}
