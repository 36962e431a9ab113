package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/seckill-go/seckill/lock"
)

// mutexModel is the sequential specification the recorded histories must linearize to: a
// mutex that is free or held by one client, and whose acquisitions carry strictly increasing
// fencing tokens.
type mutexState struct {
	holder int    // -1 when free
	token  uint64 // last token issued
}

type mutexInput struct {
	acquire bool
	client  int
}

var mutexModel = porcupine.Model{
	Init: func() any { return mutexState{holder: -1} },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(mutexState), input.(mutexInput)
		if in.acquire {
			tok := output.(uint64)
			if s.holder != -1 || tok <= s.token {
				return false, s
			}
			return true, mutexState{holder: in.client, token: tok}
		}
		if s.holder != in.client {
			return false, s
		}
		return true, mutexState{holder: -1, token: s.token}
	},
	DescribeOperation: func(input, output any) string {
		in := input.(mutexInput)
		if in.acquire {
			return fmt.Sprintf("acquire(%d) -> %v", in.client, output)
		}
		return fmt.Sprintf("release(%d)", in.client)
	},
}

// TestModelRejectsOverlap checks that the checker can fail: two acquisitions whose intervals
// do not overlap, with no release between them, are not a mutex history.
func TestModelRejectsOverlap(t *testing.T) {
	h := []porcupine.Operation{
		{ClientId: 0, Input: mutexInput{acquire: true, client: 0}, Call: 0, Output: uint64(1), Return: 1},
		{ClientId: 1, Input: mutexInput{acquire: true, client: 1}, Call: 2, Output: uint64(2), Return: 3},
		{ClientId: 0, Input: mutexInput{client: 0}, Call: 4, Output: nil, Return: 5},
		{ClientId: 1, Input: mutexInput{client: 1}, Call: 6, Output: nil, Return: 7},
	}
	if porcupine.CheckOperations(mutexModel, h) {
		t.Fatal("the mutex model accepted two overlapping holders")
	}
}

// TestLinearizableHistory records acquire/release histories of several goroutines on one lock
// (no pauses, so leases never run out) and checks them with porcupine against mutexModel.
func TestLinearizableHistory(t *testing.T) {
	rdb := redisClient(t)
	c := lock.New(lockRedis(t, rdb), &lock.Options{Prefix: uniquePrefix(t, rdb)})
	t.Cleanup(func() { _ = c.Close() })
	const clients, rounds = 6, 20
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for id := 0; id < clients; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.NewMutex("history")
			for i := 0; i < rounds; i++ {
				call := now()
				l, err := m.Lock(ctx)
				ret := now()
				if err != nil {
					t.Error(err)
					return
				}
				op := porcupine.Operation{ClientId: id, Input: mutexInput{acquire: true, client: id},
					Call: call, Output: l.Token(), Return: ret}
				time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
				call = now()
				err = m.Unlock(ctx)
				ret = now()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				history = append(history, op, porcupine.Operation{ClientId: id,
					Input: mutexInput{client: id}, Call: call, Return: ret})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res := porcupine.CheckOperationsTimeout(mutexModel, history, 20*time.Second)
	if res != porcupine.Ok {
		t.Fatalf("history of %d operations is %s against the mutex model", len(history), res)
	}
}
