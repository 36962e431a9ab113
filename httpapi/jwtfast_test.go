package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/seckill-go/seckill"
)

var fastSecret = []byte("fast-path-secret")

// slowUser is the reference: golang-jwt alone, as userOf was before the fast path.
func slowUser(tok string, secret []byte, now time.Time) (string, bool) {
	user, err := parseUser(tok, secret, now)
	return user, err == nil
}

// checkAgainstJWT fails if the fast path accepts what golang-jwt refuses, or returns another
// subject. It reports whether the fast path accepted.
func checkAgainstJWT(t *testing.T, tok string, secret []byte, now time.Time) bool {
	t.Helper()
	fast, ok := fastUser(tok, secret, now)
	slow, sok := slowUser(tok, secret, now)
	if ok && (!sok || fast != slow) {
		t.Fatalf("fast path accepted %q as %q at %v; golang-jwt: %q, %v", tok, fast, now.Unix(), slow, sok)
	}
	if ok && !seckill.ValidID(fast) {
		t.Fatalf("fast path accepted %q with an invalid subject %q", tok, fast)
	}
	return ok
}

// signRaw builds a token from raw header and claims bytes, HMAC-SHA256-signed with key.
func signRaw(header, claims string, key []byte) string {
	in := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(in))
	return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TestFastUserTakesMintedTokens: the tokens the project mints take the fast path (or the
// speed-up would be lost without any test noticing), and are refused by it once expired.
func TestFastUserTakesMintedTokens(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	for _, user := range []string{"alice", "a", strings.Repeat("Z", 64), "u_1.2-3"} {
		tok, err := MintToken(fastSecret, user, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := fastUser(tok, fastSecret, now); !ok || got != user {
			t.Fatalf("fastUser(MintToken(%q)) = %q, %v", user, got, ok)
		}
		checkAgainstJWT(t, tok, fastSecret, now)
		for _, at := range []time.Time{now.Add(time.Hour + 4*time.Second), now.Add(time.Hour + 5*time.Second), now.Add(-time.Hour)} {
			checkAgainstJWT(t, tok, fastSecret, at)
		}
		if _, ok := fastUser(tok, fastSecret, now.Add(time.Hour+5*time.Second)); ok {
			t.Fatal("fast path accepted a token at exp + leeway")
		}
		if _, ok := fastUser(tok, []byte("other"), now); ok {
			t.Fatal("fast path accepted a token signed with another key")
		}
	}
}

// TestFastUserBoundaries: exp and nbf around the leeway, second by second, against golang-jwt.
func TestFastUserBoundaries(t *testing.T) {
	h := `{"alg":"HS256","typ":"JWT"}`
	base := int64(1_900_000_000)
	for _, claims := range []string{
		fmt.Sprintf(`{"sub":"alice","exp":%d}`, base),
		fmt.Sprintf(`{"sub":"alice","nbf":%d}`, base),
		fmt.Sprintf(`{"nbf":%d,"exp":%d,"sub":"alice","iat":%d}`, base, base+10, base+100),
		`{"sub":"alice","exp":0}`, `{"sub":"alice","nbf":0}`, `{"sub":"alice","exp":999999999999999}`,
		`{"sub":"alice","nbf":999999999999999}`, `{"sub":"alice"}`,
	} {
		tok := signRaw(h, claims, fastSecret)
		for d := -8 * time.Second; d <= 18*time.Second; d += 500 * time.Millisecond {
			checkAgainstJWT(t, tok, fastSecret, time.Unix(base, 0).Add(d))
		}
	}
}

// TestFastUserRefusesForgeries: every forgery of the auth tests is declined by the fast path
// (and then refused by golang-jwt).
func TestFastUserRefusesForgeries(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	good, _ := MintToken(fastSecret, "alice", now, time.Hour)
	claims := fmt.Sprintf(`{"sub":"alice","exp":%d}`, now.Add(time.Hour).Unix())
	hs512 := func() string {
		in := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS512","typ":"JWT"}`)) + "." +
			base64.RawURLEncoding.EncodeToString([]byte(claims))
		m := hmac.New(sha512.New, fastSecret)
		m.Write([]byte(in))
		return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}()
	lastBits := good[:len(good)-1] + string(good[len(good)-1]^1)
	for name, tok := range map[string]string{
		"alg none":        base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".",
		"RS256 header":    signRaw(`{"alg":"RS256","typ":"JWT"}`, claims, fastSecret),
		"HS512":           hs512,
		"other key":       signRaw(`{"alg":"HS256","typ":"JWT"}`, claims, []byte("other")),
		"flipped sig bit": lastBits,
		"four segments":   good + ".x",
		"two segments":    good[:strings.LastIndexByte(good, '.')],
		"expired":         signRaw(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"alice","exp":1}`, fastSecret),
		"not yet":         signRaw(`{"alg":"HS256","typ":"JWT"}`, fmt.Sprintf(`{"sub":"alice","nbf":%d}`, now.Unix()+60), fastSecret),
		"empty sub":       signRaw(`{"alg":"HS256","typ":"JWT"}`, `{"sub":""}`, fastSecret),
		"no sub":          signRaw(`{"alg":"HS256","typ":"JWT"}`, `{"exp":9999999999}`, fastSecret),
		"slash sub":       signRaw(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"../admin"}`, fastSecret),
		"long sub":        signRaw(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"`+strings.Repeat("a", 65)+`"}`, fastSecret),
		"number sub":      signRaw(`{"alg":"HS256","typ":"JWT"}`, `{"sub":42}`, fastSecret),
	} {
		if _, ok := fastUser(tok, fastSecret, now); ok {
			t.Errorf("%s: fast path accepted %q", name, tok)
		}
		if _, ok := slowUser(tok, fastSecret, now); ok {
			t.Errorf("%s: golang-jwt accepted %q", name, tok)
		}
	}
	if _, ok := fastUser(good, nil, now); ok {
		t.Error("fast path accepted a token with an empty secret")
	}
}

// randomClaims builds claims JSON from pieces chosen to hit every branch of parseFastClaims and
// every quirk of encoding/json: other and case-changed names, duplicates, escapes, null, other
// types, floats, exponents, signs, leading zeros, huge numbers, whitespace, trailing data.
func randomClaims(rng *rand.Rand, base int64) string {
	names := []string{"sub", "exp", "nbf", "iat", "sub", "exp", "nbf", "SUB", "Sub", "Exp", "iss", "aud", "jti", "su", "subx", "su\\u0062", "e\\u0078p", ""}
	subs := []string{`"alice"`, `"bob.smith-1_x"`, `""`, `"al ice"`, `"al\u0069ce"`, `"al\\ice"`, `"é"`, `42`, `null`, `true`, `["alice"]`,
		`"` + strings.Repeat("a", 64) + `"`, `"` + strings.Repeat("a", 65) + `"`, `{}`, `"alice\u0000"`, `"a/b"`}
	num := func() string {
		d := base + int64(rng.IntN(40)) - 20
		switch rng.IntN(14) {
		case 0:
			return fmt.Sprintf("%d.5", d)
		case 1:
			return fmt.Sprintf("%de0", d)
		case 2:
			return fmt.Sprintf("-%d", d)
		case 3:
			return fmt.Sprintf("0%d", d)
		case 4:
			return fmt.Sprintf(`"%d"`, d)
		case 5:
			return "null"
		case 6:
			return "1e400"
		case 7:
			return "9999999999999999999999"
		case 8:
			return "999999999999999"
		case 9:
			return "1000000000000000"
		case 10:
			return "0"
		case 11:
			return "-0"
		default:
			return fmt.Sprint(d)
		}
	}
	ws := func() string {
		if rng.IntN(12) == 0 {
			return []string{" ", "\n", "\t", "\r"}[rng.IntN(4)]
		}
		return ""
	}
	if rng.IntN(2) == 0 { // the usual shape, perhaps with one odd piece
		type member struct{ name, value string }
		ms := []member{{"sub", `"` + []string{"alice", "b", "u_1.2-3", strings.Repeat("x", 64)}[rng.IntN(4)] + `"`}}
		for _, name := range []string{"exp", "nbf", "iat"} {
			if rng.IntN(2) == 0 {
				ms = append(ms, member{name, fmt.Sprint(base + int64(rng.IntN(40)) - 20)})
			}
		}
		rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		if rng.IntN(2) == 0 {
			i := rng.IntN(len(ms))
			switch rng.IntN(4) {
			case 0:
				ms[i].name = names[rng.IntN(len(names))]
			case 1:
				ms[i].value = subs[rng.IntN(len(subs))]
			case 2:
				ms[i].value = num()
			case 3:
				ms = append(ms, ms[i])
			}
		}
		parts := make([]string, len(ms))
		for i, m := range ms {
			parts[i] = `"` + m.name + `":` + m.value
		}
		out := "{" + strings.Join(parts, ",") + "}"
		if rng.IntN(8) == 0 {
			i := rng.IntN(len(out) + 1)
			out = out[:i] + ws() + " " + out[i:]
		}
		return out
	}
	var b strings.Builder
	if rng.IntN(30) == 0 {
		return []string{`null`, `[]`, `"x"`, `{`, `}`, ``, `{}`, `{,}`, `{"sub":"alice",}`}[rng.IntN(9)]
	}
	b.WriteString(ws() + "{")
	for i, n := 0, rng.IntN(5); i < n; i++ {
		if i > 0 {
			b.WriteString(ws() + "," + ws())
		}
		name := names[rng.IntN(len(names))]
		b.WriteString(ws() + `"` + name + `"` + ws() + ":" + ws())
		if strings.EqualFold(name, "sub") || rng.IntN(8) == 0 {
			b.WriteString(subs[rng.IntN(len(subs))])
		} else {
			b.WriteString(num())
		}
	}
	b.WriteString(ws() + "}" + ws())
	if rng.IntN(25) == 0 {
		b.WriteString([]string{"x", "{}", " null", "}"}[rng.IntN(4)])
	}
	return b.String()
}

// TestFastUserDifferential compares the fast path with golang-jwt on random tokens: signed
// claims of every shape, a few headers, clocks around exp and nbf.
func TestFastUserDifferential(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	headers := []string{`{"alg":"HS256","typ":"JWT"}`, `{"alg":"HS256","typ":"JWT"}`, `{"alg":"HS256"}`, `{"typ":"JWT","alg":"HS256"}`,
		`{"alg":"hs256","typ":"JWT"}`, `{"alg":"none","typ":"JWT"}`}
	base := int64(1_900_000_000)
	n := 60_000
	if testing.Short() {
		n = 10_000
	}
	accepted := 0
	for range n {
		key := fastSecret
		if rng.IntN(20) == 0 {
			key = []byte("wrong")
		}
		tok := signRaw(headers[rng.IntN(len(headers))], randomClaims(rng, base), key)
		if rng.IntN(30) == 0 { // damage a character
			i := rng.IntN(len(tok))
			tok = tok[:i] + string("A.-_=\n"[rng.IntN(6)]) + tok[i+1:]
		}
		now := time.Unix(base+int64(rng.IntN(40))-20, int64(rng.IntN(1e9)))
		if checkAgainstJWT(t, tok, fastSecret, now) {
			accepted++
		}
	}
	if accepted < n/50 {
		t.Fatalf("the fast path accepted only %d of %d tokens: the generator no longer reaches it", accepted, n)
	}
	t.Logf("fast path accepted %d of %d", accepted, n)
}

// FuzzFastUser: for any header and claims bytes, signed with the secret or not, and any clock,
// the fast path never accepts what golang-jwt refuses, nor returns another subject.
func FuzzFastUser(f *testing.F) {
	f.Add(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"alice","exp":1900003600,"iat":1900000000}`, int64(1_900_000_000), true)
	f.Add(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"alice","nbf":1900000004}`, int64(1_900_000_000), true)
	f.Add(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"al\u0069ce","exp":1900000000}`, int64(1_900_000_000), true)
	f.Add(`{"alg":"HS256","typ":"JWT"}`, `{"Sub":"alice","sub":"bob"}`, int64(1_900_000_000), true)
	f.Add(`{"alg":"none"}`, `{"sub":"alice"}`, int64(0), false)
	f.Fuzz(func(t *testing.T, header, claims string, now int64, signed bool) {
		key := fastSecret
		if !signed {
			key = []byte("not the secret")
		}
		tok := signRaw(header, claims, key)
		checkAgainstJWT(t, tok, fastSecret, time.Unix(now, 0))
		// And the token string itself, as a client could send anything.
		checkAgainstJWT(t, claims, fastSecret, time.Unix(now, 0))
	})
}

// FuzzParseFastClaims: whatever parseFastClaims accepts, encoding/json (through golang-jwt's
// claims type) reads the same way.
func FuzzParseFastClaims(f *testing.F) {
	for _, s := range []string{`{"sub":"alice","exp":1,"iat":2}`, `{"sub":"a","nbf":0}`, `{"sub":"a","sub":"b"}`, `{"sub":"a"}x`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, ok := parseFastClaims(b)
		if !ok {
			return
		}
		tok := signRaw(`{"alg":"HS256","typ":"JWT"}`, string(b), fastSecret)
		var rc jwt.RegisteredClaims
		if _, err := jwt.NewParser(jwt.WithoutClaimsValidation()).ParseWithClaims(tok, &rc, func(*jwt.Token) (any, error) { return fastSecret, nil }); err != nil {
			t.Fatalf("parseFastClaims took %q, golang-jwt refuses it: %v", b, err)
		}
		if rc.Subject != c.sub || !seckill.ValidID(c.sub) {
			t.Fatalf("%q: sub %q, golang-jwt %q", b, c.sub, rc.Subject)
		}
		for _, x := range []struct {
			has bool
			v   int64
			d   *jwt.NumericDate
		}{{c.hasExp, c.exp, rc.ExpiresAt}, {c.hasNbf, c.nbf, rc.NotBefore}} {
			if x.has != (x.d != nil) || (x.has && !x.d.Equal(time.Unix(x.v, 0))) {
				t.Fatalf("%q: times differ from golang-jwt's (%+v)", b, rc)
			}
		}
	})
}
