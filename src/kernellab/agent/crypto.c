/*
 * crypto.*: AES-256-CBC in user space and in the kernel, through AF_ALG.
 *
 * The user-space AES is the same kind of code as the kernel's generic "aes"
 * cipher (crypto/aes_generic.c, CONFIG_CRYPTO_AES), which AF_ALG's cbc(aes)
 * runs on when no accelerated driver (AES-NI, ARMv8 CE) is built in: 32-bit
 * T-tables, each round unrolled into 16 table look-ups on 32-bit words.
 * The crypto.* pair reproduces a study that ran one AES in a kernel module
 * and in a process, so the two must differ only in where they run, not in
 * how well they are written (a byte-oriented AES is about 8 times slower).
 * Blocks are loaded and stored as little-endian words byte by byte, as
 * aes_generic does with get_unaligned_le32, so the code is right on
 * big-endian machines too.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64 /* 32-bit targets: offsets on disks over 2 GiB */
#include <linux/if_alg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "harness.h"
#include "util.h"

#define AES_BLOCK 16
#define AES256_ROUNDS 14
#define CRYPTO_BYTES (16 * KIB) /* crypto.*: bytes encrypted per op */

/* AES-256's 15 round keys, 4 little-endian words each (as aes_generic's key_enc). */
struct aes256 {
	uint32_t round_keys[4 * (AES256_ROUNDS + 1)];
};

static struct aes256 aes; /* the benchmarks' key schedule */
static void *buf[2];      /* plaintext and ciphertext; NULL when freed */
static int alg_fd = -1;   /* crypto.aes256cbc_kernel: the socket bound to cbc(aes) */
static int alg_op = -1;   /* ... and the one that encrypts */

static const uint8_t aes_sbox[256] = {
	0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76,
	0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0,
	0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15,
	0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75,
	0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84,
	0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf,
	0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8,
	0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2,
	0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73,
	0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb,
	0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79,
	0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08,
	0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
	0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e,
	0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf,
	0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
};

/* NIST SP 800-38A F.2.5 CBC-AES256.Encrypt; its key and IV serve the benchmarks too. */
static const uint8_t nist_key[32] = {
	0x60, 0x3d, 0xeb, 0x10, 0x15, 0xca, 0x71, 0xbe, 0x2b, 0x73, 0xae, 0xf0, 0x85, 0x7d, 0x77, 0x81,
	0x1f, 0x35, 0x2c, 0x07, 0x3b, 0x61, 0x08, 0xd7, 0x2d, 0x98, 0x10, 0xa3, 0x09, 0x14, 0xdf, 0xf4,
};
static const uint8_t nist_iv[AES_BLOCK] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
};
static const uint8_t nist_plaintext[4 * AES_BLOCK] = {
	0x6b, 0xc1, 0xbe, 0xe2, 0x2e, 0x40, 0x9f, 0x96, 0xe9, 0x3d, 0x7e, 0x11, 0x73, 0x93, 0x17, 0x2a,
	0xae, 0x2d, 0x8a, 0x57, 0x1e, 0x03, 0xac, 0x9c, 0x9e, 0xb7, 0x6f, 0xac, 0x45, 0xaf, 0x8e, 0x51,
	0x30, 0xc8, 0x1c, 0x46, 0xa3, 0x5c, 0xe4, 0x11, 0xe5, 0xfb, 0xc1, 0x19, 0x1a, 0x0a, 0x52, 0xef,
	0xf6, 0x9f, 0x24, 0x45, 0xdf, 0x4f, 0x9b, 0x17, 0xad, 0x2b, 0x41, 0x7b, 0xe6, 0x6c, 0x37, 0x10,
};
static const uint8_t nist_ciphertext[4 * AES_BLOCK] = {
	0xf5, 0x8c, 0x4c, 0x04, 0xd6, 0xe5, 0xf1, 0xba, 0x77, 0x9e, 0xab, 0xfb, 0x5f, 0x7b, 0xfb, 0xd6,
	0x9c, 0xfc, 0x4e, 0x96, 0x7e, 0xdb, 0x80, 0x8d, 0x67, 0x9f, 0x77, 0x7b, 0xc6, 0x70, 0x2c, 0x7d,
	0x39, 0xf2, 0x33, 0x69, 0xa9, 0xd9, 0xba, 0xcf, 0xa5, 0x30, 0xe2, 0x63, 0x04, 0x23, 0x14, 0x61,
	0xb2, 0xeb, 0x05, 0xe2, 0xc3, 0x9b, 0xe9, 0xfc, 0xda, 0x6c, 0x19, 0x07, 0x8c, 0x6a, 0x9d, 0x1b,
};

/*
 * The T-tables, as aes_generic's crypto_ft_tab and crypto_fl_tab: aes_ft[r][x]
 * is what input byte x in row r adds to its output column in a full round
 * (S-box, then MixColumns), aes_fl[r][x] the same in the last round, which
 * has no MixColumns.  Cache-line aligned like the kernel's.
 */
static uint32_t aes_ft[4][256] __attribute__((aligned(64)));
static uint32_t aes_fl[4][256] __attribute__((aligned(64)));

/* Multiplication by x (that is, 2) in AES's GF(2^8). */
static uint8_t xtime(uint8_t b)
{
	return (uint8_t)((b << 1) ^ (b & 0x80 ? 0x1b : 0));
}

static uint32_t load_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

/*
 * Computed from the S-box rather than written out as 8 KiB of data.  A
 * column is a little-endian word, row 0 in its low byte.  MixColumns sends
 * s in row 0 to (2s, s, s, 3s); in row r the same column is rotated down r
 * rows, which is a rotation left by 8r bits.
 */
static void aes_init_tables(void)
{
	for (int x = 0; x < 256; x++) {
		uint8_t s = aes_sbox[x];
		uint32_t col = (uint32_t)xtime(s) | (uint32_t)s << 8 | (uint32_t)s << 16 |
			       (uint32_t)(xtime(s) ^ s) << 24;

		for (int r = 0; r < 4; r++) {
			aes_ft[r][x] = col;
			aes_fl[r][x] = (uint32_t)s << 8 * r;
			col = col << 8 | col >> 24;
		}
	}
}

static uint32_t sub_word(uint32_t w)
{
	return (uint32_t)aes_sbox[w & 0xff] | (uint32_t)aes_sbox[w >> 8 & 0xff] << 8 |
	       (uint32_t)aes_sbox[w >> 16 & 0xff] << 16 | (uint32_t)aes_sbox[w >> 24] << 24;
}

/* Key expansion over little-endian words, as the kernel's aes_expandkey. */
static void aes256_expand_key(struct aes256 *k, const uint8_t key[32])
{
	uint32_t *w = k->round_keys;
	uint8_t rcon = 1;

	for (int i = 0; i < 8; i++)
		w[i] = load_le32(key + 4 * i);
	for (int i = 8; i < 4 * (AES256_ROUNDS + 1); i++) {
		uint32_t t = w[i - 1];

		if (i % 8 == 0) {
			/* RotWord (a right rotation of a little-endian word), SubWord, Rcon */
			t = sub_word(t >> 8 | t << 24) ^ rcon;
			rcon = xtime(rcon);
		} else if (i % 8 == 4) {
			t = sub_word(t);
		}
		w[i] = w[i - 8] ^ t;
	}
}

/* Output column of a round: aes_generic's f_rn, four look-ups and the round key. */
static inline uint32_t aes_column(const uint32_t table[4][256], uint32_t row0, uint32_t row1,
				  uint32_t row2, uint32_t row3, uint32_t key)
{
	return table[0][row0 & 0xff] ^ table[1][row1 >> 8 & 0xff] ^
	       table[2][row2 >> 16 & 0xff] ^ table[3][row3 >> 24] ^ key;
}

/*
 * One round from state in to state out: aes_generic's f_nround with table
 * aes_ft, its f_lround with aes_fl.  ShiftRows is in the arguments: row r of
 * output column n comes from input column n + r.  Written out and always
 * inlined, so the rounds become straight-line code on 32-bit registers as
 * the kernel's macros do (a loop over the columns, GCC would vectorize).
 */
static inline __attribute__((always_inline)) void
aes_round(uint32_t out[4], const uint32_t in[4], const uint32_t table[4][256], const uint32_t *key)
{
	out[0] = aes_column(table, in[0], in[1], in[2], in[3], key[0]);
	out[1] = aes_column(table, in[1], in[2], in[3], in[0], key[1]);
	out[2] = aes_column(table, in[2], in[3], in[0], in[1], key[2]);
	out[3] = aes_column(table, in[3], in[0], in[1], in[2], key[3]);
}

/* Encrypts one block, held as four little-endian words, in place. */
static void aes256_encrypt_block(const struct aes256 *k, uint32_t block[4])
{
	const uint32_t *rk = k->round_keys;
	uint32_t b0[4], b1[4]; /* the state, alternately */

	for (int n = 0; n < 4; n++)
		b0[n] = block[n] ^ rk[n];
	aes_round(b1, b0, aes_ft, rk + 4);
	aes_round(b0, b1, aes_ft, rk + 8);
	aes_round(b1, b0, aes_ft, rk + 12);
	aes_round(b0, b1, aes_ft, rk + 16);
	aes_round(b1, b0, aes_ft, rk + 20);
	aes_round(b0, b1, aes_ft, rk + 24);
	aes_round(b1, b0, aes_ft, rk + 28);
	aes_round(b0, b1, aes_ft, rk + 32);
	aes_round(b1, b0, aes_ft, rk + 36);
	aes_round(b0, b1, aes_ft, rk + 40);
	aes_round(b1, b0, aes_ft, rk + 44);
	aes_round(b0, b1, aes_ft, rk + 48);
	aes_round(b1, b0, aes_ft, rk + 52);
	aes_round(b0, b1, aes_fl, rk + 56); /* round 14, the last: no MixColumns */
	for (int n = 0; n < 4; n++)
		block[n] = b0[n];
}

/*
 * len must be a multiple of AES_BLOCK; in and out may be the same buffer.
 * The chaining value stays in words from block to block: the kernel's cbc
 * template XORs a word at a time, and bytes XORed in memory and read back
 * as words would stall store forwarding on every block.
 */
static void aes256_cbc_encrypt(const struct aes256 *k, const uint8_t iv[AES_BLOCK],
			       const uint8_t *in, uint8_t *out, size_t len)
{
	uint32_t chain[4];

	for (int n = 0; n < 4; n++)
		chain[n] = load_le32(iv + 4 * n);
	for (size_t off = 0; off < len; off += AES_BLOCK) {
		for (int n = 0; n < 4; n++)
			chain[n] ^= load_le32(in + off + 4 * n);
		aes256_encrypt_block(k, chain);
		for (int n = 0; n < 4; n++)
			store_le32(out + off + 4 * n, chain[n]);
	}
}

static bool aes_selftest(void)
{
	struct aes256 k;
	uint8_t out[sizeof(nist_plaintext)];

	aes256_expand_key(&k, nist_key);
	aes256_cbc_encrypt(&k, nist_iv, nist_plaintext, out, sizeof(out));
	return memcmp(out, nist_ciphertext, sizeof(out)) == 0;
}

/* crypto.*: a checked key schedule, buf[0] plaintext and buf[1] for the ciphertext. */
static int start_user_aes(struct run *r)
{
	uint8_t *plain;
	int err;

	aes_init_tables();
	if (!aes_selftest())
		return fail_because(r, "aes_selftest_failed");
	aes256_expand_key(&aes, nist_key);
	err = alloc_buffers(r, buf, CRYPTO_BYTES);
	if (err)
		return err;
	plain = buf[0];
	for (size_t i = 0; i < CRYPTO_BYTES; i++)
		plain[i] = (uint8_t)(i * 7 + 1);
	return 0;
}

static int stop_user_aes(struct run *r)
{
	(void)r;
	free_buffers(buf);
	return 0;
}

/* crypto.aes256cbc_user: op = encrypting CRYPTO_BYTES, IV reset each time. */
static int run_user_aes(struct run *r, unsigned long iters)
{
	(void)r;
	for (unsigned long i = 0; i < iters; i++)
		aes256_cbc_encrypt(&aes, nist_iv, buf[0], buf[1], CRYPTO_BYTES);
	return 0;
}

/* One AF_ALG request: encrypt len bytes with nist_iv, read the ciphertext back. */
static int alg_encrypt(struct run *r, const void *in, void *out, size_t len)
{
	union { /* aligned for the cmsghdrs inside */
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(uint32_t)) +
			 CMSG_SPACE(sizeof(struct af_alg_iv) + AES_BLOCK)];
	} control;
	struct iovec iov = { .iov_base = (void *)in, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
	struct af_alg_iv iv = { .ivlen = AES_BLOCK };
	uint32_t op = ALG_OP_ENCRYPT;
	struct cmsghdr *cmsg;
	ssize_t n;

	memset(&control, 0, sizeof(control));
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_ALG;
	cmsg->cmsg_type = ALG_SET_OP;
	cmsg->cmsg_len = CMSG_LEN(sizeof(op));
	memcpy(CMSG_DATA(cmsg), &op, sizeof(op));
	cmsg = CMSG_NXTHDR(&msg, cmsg);
	cmsg->cmsg_level = SOL_ALG;
	cmsg->cmsg_type = ALG_SET_IV;
	cmsg->cmsg_len = CMSG_LEN(sizeof(iv) + AES_BLOCK);
	memcpy(CMSG_DATA(cmsg), &iv, sizeof(iv));
	memcpy(CMSG_DATA(cmsg) + sizeof(iv), nist_iv, AES_BLOCK);

	n = sendmsg(alg_op, &msg, 0);
	if (n < 0)
		return fail(r, "sendmsg");
	if ((size_t)n != len)
		return fail_because(r, "sendmsg_short");
	return read_full(r, alg_op, out, len);
}

/* The kernel's ciphertext of the benchmark buffer must be ours. */
static int check_kernel_aes(struct run *r)
{
	uint8_t *ours = malloc(CRYPTO_BYTES);
	int err;

	if (!ours)
		return fail(r, "malloc");
	aes256_cbc_encrypt(&aes, nist_iv, buf[0], ours, CRYPTO_BYTES);
	err = alg_encrypt(r, buf[0], buf[1], CRYPTO_BYTES);
	if (!err && memcmp(ours, buf[1], CRYPTO_BYTES) != 0)
		err = fail_because(r, "aes_mismatch");
	free(ours);
	return err;
}

static int stop_kernel_aes(struct run *r)
{
	int err = close_fd(r, &alg_op), closed = close_fd(r, &alg_fd);

	free_buffers(buf);
	return err ? err : closed;
}

static int start_kernel_aes(struct run *r)
{
	struct sockaddr_alg sa = { .salg_family = AF_ALG, .salg_type = "skcipher",
				   .salg_name = "cbc(aes)" };
	int err = start_user_aes(r);

	if (err)
		return err;
	alg_fd = socket(AF_ALG, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (alg_fd < 0)
		err = fail(r, "socket");
	else if (bind(alg_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		err = fail(r, "bind");
	else if (setsockopt(alg_fd, SOL_ALG, ALG_SET_KEY, nist_key, sizeof(nist_key)) < 0)
		err = fail(r, "setsockopt");
	else if ((alg_op = accept4(alg_fd, NULL, NULL, SOCK_CLOEXEC)) < 0)
		err = fail(r, "accept");
	else
		err = check_kernel_aes(r);
	if (err)
		stop_kernel_aes(r);
	return err;
}

/* crypto.aes256cbc_kernel: the same op as run_user_aes, done by the kernel. */
static int run_kernel_aes(struct run *r, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		int err = alg_encrypt(r, buf[0], buf[1], CRYPTO_BYTES);

		if (err)
			return err;
	}
	return 0;
}

static const struct metric metrics[] = {
	{ .name = "crypto.aes256cbc_kernel", .kind = BANDWIDTH, .bytes = CRYPTO_BYTES,
	  .setup = start_kernel_aes, .run = run_kernel_aes, .teardown = stop_kernel_aes },
	{ .name = "crypto.aes256cbc_user", .kind = BANDWIDTH, .bytes = CRYPTO_BYTES,
	  .setup = start_user_aes, .run = run_user_aes, .teardown = stop_user_aes },
};

const struct metric_table crypto_metrics = METRIC_TABLE(metrics);
