package pow

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef")
	t0     = time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
)

const maxAge = 2 * time.Minute

// solved is a challenge for user u1 on sale s1 at bits, issued at t0, and its solution.
func solved(t testing.TB, bits int) (Challenge, string) {
	t.Helper()
	c, err := Issue(secret, "s1", "u1", bits, t0)
	if err != nil {
		t.Fatal(err)
	}
	sol, err := Solve(context.Background(), c.String(), bits)
	if err != nil {
		t.Fatal(err)
	}
	return c, sol
}

// hashBits is the work of (challenge, solution) computed here, apart from the package's code.
func hashBits(challenge, solution string) int {
	sum := sha256.Sum256([]byte(challenge + ":" + solution))
	n := 0
	for _, b := range sum {
		for i := 7; i >= 0; i-- {
			if b>>i&1 != 0 {
				return n
			}
			n++
		}
	}
	return n
}

func TestRoundTrip(t *testing.T) {
	for _, bits := range []int{1, 8, 12} {
		c, sol := solved(t, bits)
		if err := Verify(secret, c.String(), sol, "s1", "u1", t0.Add(time.Second), maxAge); err != nil {
			t.Fatalf("%d bits: %v", bits, err)
		}
		if got := hashBits(c.String(), sol); got < bits {
			t.Fatalf("%d bits: Verify accepted %q with %d zero bits", bits, sol, got)
		}
	}
}

func TestChallengeLength(t *testing.T) {
	long := strings.Repeat("x", 64)
	c, err := Issue(secret, long, long, MaxBits, t0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.String()); n != MaxChallengeLen {
		t.Fatalf("a challenge with ids of 64 bytes is %d characters, MaxChallengeLen is %d", n, MaxChallengeLen)
	}
	c, _ = Issue(secret, "sale-123", "user-456", 16, t0)
	if n := len(c.String()); n != 102 {
		t.Fatalf("a challenge with ids of 8 bytes is %d characters, the doc says 102", n)
	}
	for _, s := range []string{c.String(), long} {
		if strings.ContainsAny(s, "+/=") {
			t.Fatalf("%q is not unpadded base64url", s)
		}
	}
}

// TestTamper changes each part of a solved challenge in turn: each change must be refused for
// its reason, while the unchanged challenge (the control, first) is accepted.
func TestTamper(t *testing.T) {
	const bits = 12
	c, sol := solved(t, bits)
	now := t0.Add(time.Minute)
	// resigned keeps a field change but signs it again, as only the server can: the binding
	// and the work must still catch it.
	resigned := func(c Challenge) string {
		var buf [maxPayload]byte
		c.mac = sign(secret, c.appendPayload(buf[:0]))
		return c.String()
	}
	// notSolving is a solution that does not solve s at bits.
	notSolving := func(s string) string {
		for i := 0; ; i++ {
			if hashBits(s, strconv.Itoa(i)) < bits {
				return strconv.Itoa(i)
			}
		}
	}
	otherKey := []byte("another secret of 32 bytes......")
	type tamper struct {
		name                string
		challenge, solution string
		sale, user          string
		secret              []byte
		want                error
	}
	cases := []tamper{
		{name: "none (control)", challenge: c.String(), solution: sol, want: nil},
		{name: "solution", solution: notSolving(c.String()), want: ErrInsufficientWork},
		{name: "solution with a leading zero", solution: "0" + sol, want: ErrInvalid},
		{name: "verified for another sale", sale: "s2", want: ErrInvalid},
		{name: "verified for another user", user: "u2", want: ErrInvalid},
		{name: "verified with another secret", secret: otherKey, want: ErrInvalid},
		{name: "signature", challenge: func() string { d := c; d.mac[5] ^= 1; return d.String() }(), want: ErrInvalid},
		{name: "signed by another secret", challenge: func() string {
			var buf [maxPayload]byte
			d := c
			d.mac = sign(otherKey, d.appendPayload(buf[:0]))
			return d.String()
		}(), want: ErrInvalid},
	}
	// Each field changed under the old tag.
	fields := map[string]func(*Challenge){
		"sale":   func(d *Challenge) { d.Sale = "s2" },
		"user":   func(d *Challenge) { d.User = "u2" },
		"bits":   func(d *Challenge) { d.Bits = 1 },
		"time":   func(d *Challenge) { d.Issued = d.Issued.Add(time.Second) },
		"nonce":  func(d *Challenge) { d.Nonce[0] ^= 0x80 },
		"length": func(d *Challenge) { d.Sale = "s10" },
	}
	for name, change := range fields {
		d := c
		change(&d)
		cases = append(cases, tamper{name: name + " under the old tag", challenge: d.String(), want: ErrInvalid})
	}
	// Signed again (a challenge the server issued to someone else or at another time): the
	// binding catches sale and user; bits and nonce change the string, so the work no longer
	// fits (the solution was found for the other string).
	for name, change := range map[string]func(*Challenge){
		"sale":  fields["sale"],
		"user":  fields["user"],
		"nonce": fields["nonce"],
		"bits":  func(d *Challenge) { d.Bits = bits + 8 },
	} {
		d := c
		change(&d)
		want := ErrInsufficientWork
		if name == "sale" || name == "user" {
			want = ErrInvalid
		}
		s := resigned(d)
		if want == ErrInsufficientWork && hashBits(s, sol) >= d.Bits {
			t.Fatalf("re-signed %s: the old solution happens to solve the new string; pick another change", name)
		}
		cases = append(cases, tamper{name: name + " re-signed", challenge: s, want: want})
	}
	for _, tc := range cases {
		if tc.challenge == "" {
			tc.challenge = c.String()
		}
		if tc.solution == "" {
			tc.solution = sol
		}
		if tc.sale == "" {
			tc.sale = "s1"
		}
		if tc.user == "" {
			tc.user = "u1"
		}
		if tc.secret == nil {
			tc.secret = secret
		}
		err := Verify(tc.secret, tc.challenge, tc.solution, tc.sale, tc.user, now, maxAge)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestEveryCharacter changes each character of a solved challenge to each other base64url
// character: every change is refused as invalid (bad tag, bad encoding or bad field).
func TestEveryCharacter(t *testing.T) {
	c, sol := solved(t, 4)
	s := c.String()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range len(s) {
		for _, r := range alphabet {
			if byte(r) == s[i] {
				continue
			}
			changed := s[:i] + string(r) + s[i+1:]
			if err := Verify(secret, changed, sol, "s1", "u1", t0, maxAge); !errors.Is(err, ErrInvalid) {
				t.Fatalf("character %d changed to %q: Verify = %v, want ErrInvalid", i, r, err)
			}
		}
	}
	for _, changed := range []string{s[:len(s)-1], s + "A", s + "AA", s[1:], "", strings.Repeat("A", MaxChallengeLen+1)} {
		if err := Verify(secret, changed, sol, "s1", "u1", t0, maxAge); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%q: Verify = %v, want ErrInvalid", changed, err)
		}
	}
}

func TestWindow(t *testing.T) {
	c, sol := solved(t, 4)
	for _, tc := range []struct {
		name string
		now  time.Time
		age  time.Duration
		want error
	}{
		{"at issue", t0, maxAge, nil},
		{"at maxAge", t0.Add(maxAge), maxAge, nil},
		{"a second past maxAge", t0.Add(maxAge + time.Second), maxAge, ErrExpired},
		{"a day old", t0.Add(24 * time.Hour), maxAge, ErrExpired},
		{"issued MaxSkew ahead of the verifier's clock", t0.Add(-MaxSkew), maxAge, nil},
		{"issued a second beyond MaxSkew ahead", t0.Add(-MaxSkew - time.Second), maxAge, ErrExpired},
		{"verified at the zero time", time.Time{}, maxAge, ErrExpired},
		{"maxAge 0", t0, 0, ErrExpired},
		{"maxAge negative", t0, -time.Second, ErrExpired},
	} {
		err := Verify(secret, c.String(), sol, "s1", "u1", tc.now, tc.age)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Extreme issue times (only the server can sign them) neither wrap nor panic.
	for _, sec := range []int64{-1 << 63, 1<<63 - 1, 0} {
		d := Challenge{Sale: "s1", User: "u1", Bits: 1, Issued: time.Unix(sec, 0)}
		var buf [maxPayload]byte
		d.mac = sign(secret, d.appendPayload(buf[:0]))
		if err := Verify(secret, d.String(), "0", "s1", "u1", t0, maxAge); !errors.Is(err, ErrExpired) {
			t.Errorf("issued at %d: Verify = %v, want ErrExpired", sec, err)
		}
	}
}

// TestWorkCheckCanFail is the negative control of the work check: at 16 bits, each counter
// that does not solve the challenge (by this test's own count of zero bits) is refused as
// insufficient work, and the one Solve found is accepted.
func TestWorkCheckCanFail(t *testing.T) {
	const bits = 16
	c, sol := solved(t, bits)
	s := c.String()
	refused := 0
	for i := range 200 {
		cand := strconv.Itoa(i)
		err := Verify(secret, s, cand, "s1", "u1", t0, maxAge)
		if hashBits(s, cand) >= bits {
			if err != nil {
				t.Fatalf("%s solves (%d bits) but Verify = %v", cand, hashBits(s, cand), err)
			}
			continue
		}
		if !errors.Is(err, ErrInsufficientWork) {
			t.Fatalf("%s has %d zero bits, fewer than %d, but Verify = %v", cand, hashBits(s, cand), bits, err)
		}
		refused++
	}
	if refused < 190 {
		t.Fatalf("only %d of 200 counters refused at %d bits", refused, bits)
	}
	if err := Verify(secret, s, sol, "s1", "u1", t0, maxAge); err != nil {
		t.Fatal(err)
	}
}

func TestMalformedSolutions(t *testing.T) {
	c, _ := solved(t, 1)
	for _, s := range []string{"", "00", "01", "-1", "+1", "1a", " 1", "1 ", "١", strings.Repeat("9", MaxSolutionLen+1), "0x10"} {
		if err := Verify(secret, c.String(), s, "s1", "u1", t0, maxAge); !errors.Is(err, ErrInvalid) {
			t.Errorf("solution %q: Verify = %v, want ErrInvalid", s, err)
		}
	}
}

// TestServerMistakes: a short secret, a difficulty out of range and invalid ids are errors of
// the server's own, not the client's: none of them is one of the client's sentinels.
func TestServerMistakes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		key        []byte
		sale, user string
		bits       int
	}{
		{"short secret", secret[:MinSecretBytes-1], "s", "u", 8},
		{"no secret", nil, "s", "u", 8},
		{"0 bits", secret, "s", "u", 0},
		{"too many bits", secret, "s", "u", MaxBits + 1},
		{"empty sale", secret, "", "u", 8},
		{"bad user", secret, "s", "u/1", 8},
		{"long user", secret, "s", strings.Repeat("u", 65), 8},
	} {
		if _, err := Issue(tc.key, tc.sale, tc.user, tc.bits, t0); err == nil {
			t.Errorf("Issue with %s: no error", tc.name)
		}
	}
	c, sol := solved(t, 1)
	err := Verify(secret[:MinSecretBytes-1], c.String(), sol, "s1", "u1", t0, maxAge)
	if err == nil || errors.Is(err, ErrInvalid) || errors.Is(err, ErrExpired) || errors.Is(err, ErrInsufficientWork) {
		t.Fatalf("Verify with a short secret = %v, want the server's own error", err)
	}
	if _, err := Solve(context.Background(), c.String(), 0); err == nil {
		t.Fatal("Solve at 0 bits: no error")
	}
	if _, err := Solve(context.Background(), strings.Repeat("A", MaxChallengeLen+1), 8); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Solve of a long challenge = %v, want ErrInvalid", err)
	}
}

// TestUnique: two challenges issued in the same second to the same user for the same sale
// differ (the nonce), so no work can be done ahead.
func TestUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		c, err := Issue(secret, "s1", "u1", 8, t0)
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.String()] {
			t.Fatal("the same challenge issued twice")
		}
		seen[c.String()] = true
	}
}

// TestSolveSmallest: Solve's counter is the smallest that solves (what pow.js finds too), and
// its in-place decimal increment spells every counter as strconv does.
func TestSolveSmallest(t *testing.T) {
	for range 20 {
		c, sol := solved(t, 8)
		n, err := strconv.Atoi(sol)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if hashBits(c.String(), strconv.Itoa(i)) >= 8 {
				t.Fatalf("Solve found %d, but %d solves already", n, i)
			}
		}
	}
	b := []byte("x:0")
	for i := 1; i <= 200_000; i++ {
		b = increment(b, 2)
		if string(b[2:]) != strconv.Itoa(i) {
			t.Fatalf("increment gave %s, want %d", b[2:], i)
		}
	}
}

func TestSolveStops(t *testing.T) {
	c, err := Issue(secret, "s1", "u1", MaxBits, t0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	// 28 bits is ~2.7·10^8 hashes: the cancel comes first but on a machine fast enough to solve
	// it, a solution is fine too.
	sol, err := Solve(ctx, c.String(), MaxBits)
	if err == nil {
		if verr := Verify(secret, c.String(), sol, "s1", "u1", t0, maxAge); verr != nil {
			t.Fatal(verr)
		}
		return
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Solve after cancel = %v, want context.Canceled", err)
	}
}

// TestVerifyConcurrent: Verify keeps no state; many goroutines verifying their own challenges
// at once each get their own answer (a shared buffer would mix them up under -race).
func TestVerifyConcurrent(t *testing.T) {
	const workers = 32
	type job struct {
		c   Challenge
		sol string
	}
	jobs := make([]job, workers)
	for i := range jobs {
		c, err := Issue(secret, "s1", "u"+strconv.Itoa(i), 6, t0)
		if err != nil {
			t.Fatal(err)
		}
		sol, err := Solve(context.Background(), c.String(), 6)
		if err != nil {
			t.Fatal(err)
		}
		jobs[i] = job{c, sol}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*200)
	for i := range workers {
		wg.Go(func() {
			j, other := jobs[i], jobs[(i+1)%workers]
			for range 100 {
				if err := Verify(secret, j.c.String(), j.sol, "s1", j.c.User, t0, maxAge); err != nil {
					errs <- err
				}
				if err := Verify(secret, other.c.String(), other.sol, "s1", j.c.User, t0, maxAge); !errors.Is(err, ErrInvalid) {
					errs <- errors.New("another user's challenge accepted")
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
