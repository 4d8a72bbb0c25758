import Foundation
import Testing
import WaybillTesting

/// Every seed input of `Fuzzing/Corpus/<target>` through its fuzz target, as an ordinary test.
///
/// The fuzz targets (`Targets` links to `Fuzzing/Sources/WaybillFuzz`, without libFuzzer's entry
/// point) are compiled with the rest of the tests, so a change to the code under test that breaks
/// the harness fails `make test` instead of going unnoticed until the next `make fuzz`; and every
/// seed, including the inputs that once crashed (e.g. the signed chunk size of `http-response`),
/// stays a regression test. A broken invariant traps (`FuzzCheck.expect`), failing the run.
///
/// Targets block their thread while a server answers (as libFuzzer's loop does), so the replay runs
/// on a thread of its own (`runBlocking`), one target at a time: never on the 2-thread cooperative pool.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct SeedReplayTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzzing/Corpus")

    @Test(arguments: FuzzTarget.all.map(\.name))
    func everySeedPassesItsTarget(name: String) async throws {
        let target = try #require(FuzzTarget.named(name))
        let folder = Self.corpus.appendingPathComponent(name)
        let seeds = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(!seeds.isEmpty, "no seeds for \(name)")
        let inputs = try seeds.map { try Data(contentsOf: folder.appendingPathComponent($0)) }
        try await runBlocking {
            for bytes in inputs {
                var input = FuzzInput(Array(bytes))
                target.run(&input)
            }
        }
    }

    @Test func everyTargetHasACorpusFolder() throws {
        let folders = Set(try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path))
        #expect(Set(FuzzTarget.all.map(\.name)).isSubset(of: folders))
    }
}
