import Testing

/// Request bodies `RequestBodyDecodingTests` decodes both ways: valid ones, and every kind of
/// fault (wrong types, nulls, missing fields, unknown enum values, faults inside stages, several
/// faults at once, duplicate keys, bodies that are not objects or not JSON).
enum RequestBodyCorpus {
    struct Sample: Sendable, CustomTestStringConvertible {
        /// One of `ReferenceBodies.kinds`.
        var kind: String
        var body: String
        var testDescription: String { "\(kind) \(body)" }
    }

    static let cases: [Sample] =
        create.map { Sample(kind: "create", body: $0) } + patch.map { Sample(kind: "patch", body: $0) }
        + status.map { Sample(kind: "status", body: $0) } + assign.map { Sample(kind: "assign", body: $0) }
        + document.map { Sample(kind: "document", body: $0) } + login.map { Sample(kind: "login", body: $0) }

    static let create = [
        #"{"title":"Pallets"}"#,
        #"{"title":"t","notes":"n","driver_id":3,"stages":[{"kind":"pickup","address":"A 1","planned_at":"2026-12-01T10:00:00.000Z"},{"id":9,"kind":"delivery","address":"B"}]}"#,
        #"{"title":"t","notes":null,"driver_id":null,"stages":null}"#,
        #"{"title":"t","stages":[]}"#,
        #"{"title":"é 🚚 \u00e9\ud83d\ude9a \"q\" \\ \/ \b\f\n\r\t \u0000 e\u0301"}"#,
        #" {"title" : "t" , "driver_id" : -0 } "#,
        #"{"title":"t","driver_id":1.0}"#, #"{"title":"t","driver_id":1e2}"#, #"{"title":"t","driver_id":2.50E+1}"#,
        #"{"title":"t","driver_id":-9223372036854775808}"#, #"{"title":"t","driver_id":9223372036854775807}"#,
        #"{"title":"t","driver_id":1.5}"#, #"{"title":"t","driver_id":1e400}"#, #"{"title":"t","driver_id":9223372036854775808}"#,
        #"{"title":"t","driver_id":"3"}"#, #"{"title":"t","driver_id":true}"#, #"{"title":"t","driver_id":[]}"#,
        #"{"title":"t","driver_id":{}}"#,
        #"{"title":null}"#, #"{"title":5}"#, #"{"title":[]}"#, #"{"title":{}}"#, #"{"title":true}"#, #"{"title":1.5}"#,
        #"{"notes":"x"}"#, "{}", #"{"Title":"t"}"#,
        #"{"title":5,"notes":5}"#, #"{"title":"t","notes":5,"driver_id":"x"}"#,
        #"{"title":"t","driver_id":"x","stages":5}"#, #"{"stages":5,"driver_id":"x","title":"t"}"#,
        #"{"title":"t","stages":5}"#, #"{"title":"t","stages":{}}"#, #"{"title":"t","stages":"x"}"#,
        #"{"title":"t","stages":[1]}"#, #"{"title":"t","stages":[null]}"#, #"{"title":"t","stages":["x"]}"#,
        #"{"title":"t","stages":[[]]}"#,
        #"{"title":"t","stages":[{}]}"#, #"{"title":"t","stages":[{"kind":"pickup"}]}"#,
        #"{"title":"t","stages":[{"address":"a"}]}"#, #"{"title":"t","stages":[{"kind":"fly","address":"a"}]}"#,
        #"{"title":"t","stages":[{"kind":null,"address":"a"}]}"#, #"{"title":"t","stages":[{"kind":3,"address":"a"}]}"#,
        #"{"title":"t","stages":[{"kind":"Pickup","address":"a"}]}"#,
        #"{"title":"t","stages":[{"kind":"pickup","address":"a","id":"x"}]}"#,
        #"{"title":"t","stages":[{"kind":"pickup","address":"a","id":1.5}]}"#,
        #"{"title":"t","stages":[{"kind":"pickup","address":"a","planned_at":5}]}"#,
        #"{"title":"t","stages":[{"kind":"pickup","address":null}]}"#,
        #"{"title":"t","stages":[{"kind":"pickup","address":"a"},{"kind":"x"}]}"#,
        #"{"title":"t","stages":[{"kind":"pickup","address":"a"},7]}"#,
        #"{"title":"t","stages":[{"kind":"stop","address":"a","id":null,"planned_at":null}]}"#,
        #"{"title":"t","stages":[{"id":"x","kind":"fly"}]}"#,
        #"{"title":"t","stages":[{"kind":"stop","address":"a","kind":"fly"}]}"#,
        #"{"title":"t","title":5}"#, #"{"title":5,"title":"t"}"#,
        #"{"title":"t","extra":{"deep":[1,2,{"x":null}]},"more":1.5e400,"n":-0.25,"b":false}"#,
        #"{"ti\u0074le":"escaped key"}"#, #"{"":"empty key","title":"t"}"#,
        "", "null", "[]", "[1,2]", #""x""#, "3", "true", "1.5", "[{\"title\":\"t\"}]",
        #"{"title": "#, #"{"title":"t"} x"#, "nul", " ", #"{"title":"t"}}"#, "{'title':'t'}",
        #"{"title":"\ud800"}"#, #"{"title":"\x"}"#, #"{"title":"t","driver_id":01}"#, #"{"title":"t","driver_id":.5}"#,
    ]

    static let patch = [
        "{}", #"{"title":"t"}"#, #"{"notes":""}"#, #"{"stages":[]}"#, #"{"title":null,"notes":null,"stages":null}"#,
        #"{"title":1}"#, #"{"stages":{}}"#, #"{"stages":[{"kind":"delivery"}]}"#, #"{"notes":[],"title":1}"#,
        #"{"stages":[{"id":4,"kind":"delivery","address":"x"}],"title":"New"}"#, "", "[]",
    ]

    static let status = [
        #"{"status":"new"}"#, #"{"status":"assigned"}"#, #"{"status":"accepted"}"#, #"{"status":"in_progress"}"#,
        #"{"status":"completed"}"#, #"{"status":"cancelled"}"#, #"{"status":"inProgress"}"#, #"{"status":"flying"}"#,
        #"{"status":3}"#, #"{"status":null}"#, "{}", #"{"status":""}"#, #"{"Status":"new"}"#, #"{"status":["new"]}"#,
    ]

    static let assign = [
        #"{"driver_id":3}"#, #"{"driver_id":0}"#, #"{"driver_id":null}"#, "{}", #"{"driver_id":"7"}"#,
        #"{"driver_id":1e2}"#, #"{"driver_id":10e-1}"#, #"{"driver_id":1.5}"#, #"{"driver_id":-0.0}"#,
        #"{"driver_id":3,"driver_id":"x"}"#, #"{"driver_id":1.5,"driver_id":3}"#, #"{"driver_\u0069d":4}"#,
        #"{"driver_id":false}"#, #"{"driverId":3}"#, #"{"driver_id":12345678901234567890}"#,
    ]

    static let document = [
        #"{"name":"cmr.pdf","kind":"cmr"}"#, #"{"name":"x"}"#, #"{"kind":"x"}"#, #"{"name":1,"kind":2}"#,
        #"{"name":"","kind":""}"#, #"{"kind":null,"name":"n"}"#,
    ]

    static let login = [
        #"{"email":"a@b.c","password":"p"}"#, #"{"email":"a@b.c"}"#, #"{"password":"p"}"#,
        #"{"email":null,"password":"p"}"#, "email=a", #"{"email":"a","password":5}"#, "",
    ]
}
