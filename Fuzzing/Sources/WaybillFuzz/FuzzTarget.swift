/// One fuzz target: a name (the corpus folder `Fuzzing/Corpus/<name>`) and a function that feeds
/// one input to the code under test and traps (via `FuzzCheck.expect`) if an invariant breaks.
///
/// libFuzzer only reports crashes, so a target that wants to catch wrong answers (not only
/// crashes) checks them itself: `FuzzCheck.expect` calls `fatalError`, which libFuzzer records as
/// a crash with the input that caused it.
struct FuzzTarget: Sendable {
    let name: String
    /// One line for `fuzz.sh --list` and the docs.
    let summary: String
    let run: @Sendable (inout FuzzInput) -> Void
}

extension FuzzTarget {
    /// Every target, in the order `make fuzz` runs them. Adding one = one function and one line here.
    static let all: [FuzzTarget] = [
        .chunkedBody,
        .httpResponse,
        .httpWire,
        .apiRequest,
        .router,
        .orderListQuery,
        .ifMatch,
        .jsonBodies,
        .jsonReader,
        .webSocketHandshake,
        .clientFrame,
        .serverFrame,
        .brokerBatch,
    ]

    static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }
}

/// Invariant checks that turn a wrong answer into a crash libFuzzer reports.
enum FuzzCheck {
    static func expect(
        _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #file,
        line: UInt = #line
    ) {
        if !condition() { fatalError("fuzz invariant failed: \(message())", file: file, line: line) }
    }
}
