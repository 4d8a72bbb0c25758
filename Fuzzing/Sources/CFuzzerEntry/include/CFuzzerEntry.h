#ifndef WAYBILL_FUZZER_ENTRY_H
#define WAYBILL_FUZZER_ENTRY_H
// Nothing to import: this target only provides the program's entry point (see CFuzzerEntry.c).
#endif
