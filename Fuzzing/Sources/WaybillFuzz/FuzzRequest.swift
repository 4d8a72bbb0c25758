import Foundation
import WaybillNetwork

/// Reads an `HTTPRequest` from a fuzz input laid out like a small HTTP request, so seeds are readable:
///
///     1                                   identity: 0 none, 1 dispatcher, 2 and 3 drivers
///     PATCH /api/orders/1?x=1             method, path, raw query
///     If-Match: "o1-v1"                   headers, one per line, until an empty line
///
///     {"title":"t"}                       the body
enum FuzzRequest {
    static func read(_ input: inout FuzzInput, fixture: ServerFixture) -> HTTPRequest {
        let identity = input.byte()
        _ = input.lineBytes()  // the rest of the identity line
        let requestLine = input.line()
        let space = requestLine.firstIndex(of: " ") ?? requestLine.endIndex
        let method = String(requestLine[..<space])
        let target = requestLine[space...].dropFirst()
        let question = target.firstIndex(of: "?") ?? target.endIndex
        let query = target[question...].dropFirst().split(separator: "&").map { pair(String($0), decode: true) }
        var headers = HTTPHeaders()
        if let authorization = fixture.authorization(identity) { headers.add("authorization", authorization) }
        while !input.isEmpty {
            let line = input.line()
            if line.isEmpty { break }
            let colon = line.firstIndex(of: ":") ?? line.endIndex
            headers.add(String(line[..<colon]), String(line[colon...].dropFirst().drop { $0 == " " }))
        }
        return HTTPRequest(
            method: method, path: String(target[..<question]), query: query, headers: headers, body: input.rest(),
            remoteAddress: "127.0.0.1")
    }

    /// `name=value` (a missing `=` gives an empty value); percent-decoded like lws does when `decode`.
    static func pair(_ text: String, decode: Bool = false) -> (name: String, value: String) {
        let eq = text.firstIndex(of: "=") ?? text.endIndex
        let name = String(text[..<eq]), value = String(text[eq...].dropFirst())
        guard decode else { return (name, value) }
        return (name.removingPercentEncoding ?? name, value.removingPercentEncoding ?? value)
    }
}
