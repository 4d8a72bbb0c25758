/// Receipts (SPEC §5 rule 7): the device tells the server which order versions it now shows.
extension DriverSession {
    /// The version of each order on screen: list rows, and for an opened order its detail's.
    ///
    /// An opened order is seen as its detail shows it, also when its row is newer: a row carries
    /// no stages or notes, so a receipt for the row's version would tell the dispatcher a new
    /// address was seen while the screen still shows the old one (its refetch failed; found by
    /// a review, 2026-12-04).
    ///
    /// Nothing read before the last `reset` counts until it is fetched again: after a restore, a
    /// version number may name content the driver never saw (found by a review, 2026-12-04).
    var shownVersions: [OrderID: Int64] {
        var shown: [OrderID: Int64] = [:]
        if ordersGeneration == historyGeneration { for row in orders { shown[row.id] = row.version } }
        for (id, cached) in details {
            if cached.generation == historyGeneration { shown[id] = cached.detail.version } else { shown[id] = nil }
        }
        return shown
    }

    /// Sends `seen` for every shown version not yet reported on the live socket; nothing when not live
    /// or while a resume's outcome is unknown.
    ///
    /// Called after each fetch that changed what is shown and when a socket goes live (a receipt sent on
    /// a dropped socket may be lost, so a new socket reports everything shown again). Frames go out in
    /// the order they were decided.
    func reportShown() {
        guard machine.state == .live, let connection else { return }
        // While a resume's outcome is unknown a `reset` may still come (`StateMachine.holdsActions`):
        // the versions shown may be of a history the server no longer has. Sent once it is known.
        guard !machine.holdsActions else {
            receiptsHeldForResume = true
            return
        }
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
