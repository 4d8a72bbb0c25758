/// Receipts (SPEC §5 rule 7): the device tells the server which order versions it now shows.
extension DriverSession {
    /// The version of each order on screen: list rows and opened details (the newer where both show it).
    var shownVersions: [OrderID: Int64] {
        var shown: [OrderID: Int64] = [:]
        for row in orders { shown[row.id] = max(shown[row.id] ?? 0, row.version) }
        for (id, cached) in details { shown[id] = max(shown[id] ?? 0, cached.detail.version) }
        return shown
    }

    /// Sends `seen` for every shown version not yet reported on the live socket; nothing when not live.
    ///
    /// Called after each fetch that changed what is shown and when a socket goes live (a receipt sent on
    /// a dropped socket may be lost, so a new socket reports everything shown again). Frames go out in
    /// the order they were decided.
    func reportShown() {
        guard machine.state == .live, let connection else { return }
        let receipts = self.receipts.unreported(shownVersions)
        guard !receipts.isEmpty else { return }
        let frames = ReceiptTracker.frames(receipts)
        let previous = receiptSends
        receiptSends = Task {
            await previous?.value
            for frame in frames { await connection.send(frame) }
        }
    }
}
