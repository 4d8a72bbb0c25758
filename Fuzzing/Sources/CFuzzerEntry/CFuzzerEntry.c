// The fuzz executable's entry point.
//
// SwiftPM links a debug executable with `--defsym main=<Module>_main` (so tests can link it), which
// would hide libFuzzer's own `main`. This defines that renamed entry point and hands control to
// libFuzzer's driver with the target's callback (both come with -sanitize=fuzzer). Where SwiftPM
// does not rename, libFuzzer's `main` is used and this function is simply never called.
#include <stddef.h>
#include <stdint.h>
#include "CFuzzerEntry.h"

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int WaybillFuzz_main(int argc, char **argv) {
    return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
}
