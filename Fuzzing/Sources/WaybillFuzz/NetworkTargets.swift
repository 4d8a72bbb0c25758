@testable import WaybillNetwork

extension FuzzTarget {
    /// `Transfer-Encoding: chunked` request bodies (`ChunkedBodyDecoder`): byte 1 sets the limit,
    /// byte 2 how the body is cut into pieces, the rest is the raw body.
    ///
    /// Checks, beyond "no crash": fed whole or in pieces, the decoder gives the same answer and the
    /// same body, and a body never exceeds the limit.
    static let chunkedBody = FuzzTarget(name: "chunked-body", summary: "HTTP chunked request bodies") { input in
        let limit = Int(input.byte()) * 16
        var step = Int(input.byte() % 13) + 1
        let raw = input.rest()

        var whole = ChunkedBodyDecoder(limit: limit)
        let wholeProgress = raw.isEmpty ? .needMore : raw.withUnsafeBytes { whole.feed($0) }

        var pieces = ChunkedBodyDecoder(limit: limit)
        var piecesProgress = ChunkedBodyDecoder.Progress.needMore
        var offset = 0
        while offset < raw.count && piecesProgress == .needMore {
            let n = min(step, raw.count - offset)
            piecesProgress = raw[offset..<offset + n].withUnsafeBytes { pieces.feed($0) }
            offset += n
            step = (step * 5 + 3) % 17 + 1
        }
        FuzzCheck.expect(wholeProgress == piecesProgress, "whole: \(wholeProgress), in pieces: \(piecesProgress)")
        FuzzCheck.expect(whole.body.count <= limit, "body of \(whole.body.count) bytes over the limit \(limit)")
        if wholeProgress == .complete { FuzzCheck.expect(whole.body == pieces.body, "bodies differ") }
    }

    /// The HTTP client's response parser (`ResponseParser`, used by `waybill driver` against a
    /// server it does not control): byte 1 says whether the request was a HEAD, the rest is the answer.
    static let httpResponse = FuzzTarget(name: "http-response", summary: "HTTP responses read by the client") { input in
        let forHEAD = input.byte() & 1 == 1
        let raw = input.rest()
        guard let response = try? ResponseParser.parse(raw, forHEAD: forHEAD) else { return }
        FuzzCheck.expect(response.body.count <= raw.count, "a body longer than the response")
        if forHEAD { FuzzCheck.expect(response.body.isEmpty, "a body for HEAD") }
    }
}
