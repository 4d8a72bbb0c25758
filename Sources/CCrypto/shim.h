#ifndef WAYBILL_CCRYPTO_SHIM_H
#define WAYBILL_CCRYPTO_SHIM_H
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#endif
