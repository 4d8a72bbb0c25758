import WaybillClient

extension FuzzTarget {
    /// Frames from the server as the client library reads them (`ServerFrame.parse`): the whole
    /// input is one text frame.
    ///
    /// Checks: parsing is deterministic, and only `order_…` types become order events.
    static let serverFrame = FuzzTarget(name: "server-frame", summary: "server → client text frames") { input in
        let text = input.restText()
        let frame = ServerFrame.parse(text)
        FuzzCheck.expect(ServerFrame.parse(text) == frame, "two parses differ")
        if case .event(let event) = frame {
            FuzzCheck.expect(event.kind.rawValue.hasPrefix("order_"), "event of type \(event.kind)")
        }
    }
}
