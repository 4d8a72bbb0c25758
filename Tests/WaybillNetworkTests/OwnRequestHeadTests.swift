import Testing

@testable import WaybillNetwork

/// `ServerCore.bodyIsOwnRequestHead` (lws 4.1's pipelining bug): a body that starts with, or is a
/// prefix of, "METHOD /" is the request's own head; any JSON body is not.
struct OwnRequestHeadTests {
    @Test func bodiesThatAreTheHeadAndBodiesThatAreNot() {
        func check(_ method: String, _ body: String) -> Bool {
            ServerCore.bodyIsOwnRequestHead(HTTPRequest(method: method, path: "/x", body: Array(body.utf8)))
        }
        for body in ["P", "PATCH", "PATCH ", "PATCH /", "PATCH /api/orders/1/ HTTP/1.1\r\n"] {
            #expect(check("PATCH", body), "\(body)")
        }
        for body in ["", "{\"notes\":\"x\"}", "PATCH/", "PATCHX /", "POST /", "PATCH x", "patch /"] {
            #expect(!check("PATCH", body), "\(body)")
        }
        #expect(check("POST", "POST /api/orders/ HTTP/1.1"))
    }
}
