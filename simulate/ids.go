package simulate

// Identifiers are derived from (seed, request sequence number) with
// bijective mixers instead of being drawn from the RNG and stored. That keeps
// the truth builder streaming: a page only remembers the sequence number of
// its last writer, and the writer's request id, rids and room are recomputed
// from it when a victim is found.

const (
	keyRoom    = 0x9e3779b97f4a7c15
	keyReqA    = 0xbf58476d1ce4e5b9
	keyReqB    = 0x94d049bb133111eb
	keyPrefill = 0x2545f4914f6cdd1d
	keyDecode  = 0x5851f42d4c957f2d
)

// mix64 is the splitmix64 finalizer: a bijection on uint64.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// mix63 is a bijection on [0, 2^63): xorshifts and odd multiplications
// modulo 2^63. Bootstrap rooms are random 63-bit values (the gateway masks
// with i64::MAX), so a bijection keeps them unique per run.
func mix63(x uint64) uint64 {
	const m = 1<<63 - 1
	x &= m
	x ^= x >> 29
	x = (x * 0xbf58476d1ce4e5b9) & m
	x ^= x >> 32
	x = (x * 0x94d049bb133111eb) & m
	x ^= x >> 29
	return x
}

type idGen struct{ seed uint64 }

func (g idGen) room(seq uint32) uint64 {
	r := mix63(uint64(seq) + g.seed*keyRoom)
	if r == 0 { // 0 means "unknown" in the schema
		r = 1
	}
	return r
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// requestID renders the gateway id: "chatcmpl-" + 24 alphanumerics, like
// sgl-model-gateway. The first 11 characters encode a bijection of seq, so
// ids are unique within a run.
func (g idGen) requestID(seq uint32) string {
	var b [9 + 24]byte
	copy(b[:], "chatcmpl-")
	a := mix64(uint64(seq) ^ (g.seed * keyReqA))
	for i := 0; i < 11; i++ {
		b[9+i] = base62[a%62]
		a /= 62
	}
	c := mix64(uint64(seq) + g.seed*keyReqB + 1)
	for i := 11; i < 24; i++ {
		b[9+i] = base62[c%62]
		c /= 62
	}
	return string(b[:])
}

const hexdig = "0123456789abcdef"

func uuidHex(a, b uint64) string {
	var out [32]byte
	for i := 0; i < 16; i++ {
		out[15-i] = hexdig[a&15]
		a >>= 4
		out[31-i] = hexdig[b&15]
		b >>= 4
	}
	return string(out[:])
}

// prefillRID and decodeRID differ: in real SGLang each server generates its
// own uuid4 hex rid; only bootstrap_room joins the two sides.
func (g idGen) prefillRID(seq uint32) string {
	return uuidHex(mix64(uint64(seq)^g.seed*keyPrefill), mix64(uint64(seq)+keyPrefill+g.seed))
}

func (g idGen) decodeRID(seq uint32) string {
	return uuidHex(mix64(uint64(seq)^g.seed*keyDecode), mix64(uint64(seq)+keyDecode+g.seed))
}
