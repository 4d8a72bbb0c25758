#ifndef WAYBILL_CCRYPTO_SHIM_H
#define WAYBILL_CCRYPTO_SHIM_H
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

/* SHA-256 of `length` bytes into `out` (32 bytes); 1 on success.
 *
 * Why not EVP_Digest: every authenticated request hashes its token, one request at a time with
 * the loop idle in between, so the code runs cold. EVP_Digest allocates a context and a provider
 * context and takes reference counts through OpenSSL 3's provider layer on each call: measured
 * 1.3 % of the server's CPU at 1 000 writes/s (docs/BENCHMARKS.md, 2026-12-03), though it takes
 * 0.18 us in a hot loop. The SHA256_* functions work on a stack context with no allocation
 * (0.09 us hot, and far less code to bring into cache). OpenSSL 3 marks them deprecated in favour of
 * EVP but still ships them; the warning is silenced here only. */
static inline int waybill_sha256(const void *bytes, size_t length, unsigned char *out) {
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    SHA256_CTX context;
    int ok = SHA256_Init(&context) && SHA256_Update(&context, bytes, length) && SHA256_Final(out, &context);
    OPENSSL_cleanse(&context, sizeof context);
    return ok;
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
}
#endif
