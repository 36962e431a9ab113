package lock

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts live one per file in lua/, each with a header listing KEYS, ARGV and what it
// returns. common.lua holds the helpers they share; it is spliced into each script at its
// "-- @common" line. Above that line a script may have a fast path (acquire and release do)
// that returns before the helpers are created: Redis runs the whole script text on every
// call, and defining the helpers is a measurable share of an uncontended lock+unlock pair.
//
//go:embed lua/*.lua
var luaFS embed.FS

var (
	scriptAcquire    = loadScript("acquire.lua")
	scriptRelease    = loadScript("release.lua")
	scriptReleaseAll = loadScript("release_all.lua")
	scriptCancel     = loadScript("cancel.lua")
	scriptRenew      = loadScript("renew.lua")
	scriptFence      = loadScript("fence.lua")
)

// script is one Lua script of this package.
type script struct {
	src string
	sha string // hex SHA-1 of src, as EVALSHA wants it
}

func loadScript(name string) *script {
	common, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		panic("lock: missing embedded lua/common.lua: " + err.Error())
	}
	body, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic("lock: missing embedded lua/" + name + ": " + err.Error())
	}
	const marker = "\n-- @common\n"
	if strings.Count(string(body), marker) != 1 {
		panic("lock: lua/" + name + " must have exactly one \"-- @common\" line")
	}
	src := strings.Replace(string(body), marker, "\n"+string(common)+"\n", 1)
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}

// run calls the script with EVALSHA, and with EVAL (which also caches it) when the server
// does not know it yet. keys are the lock's key names already boxed (Mutex.keyArgs): go-redis'
// Script.Run would box each name again on every call, and the uncontended path is short
// enough for that to show.
func (s *script) run(ctx context.Context, rdb redis.UniversalClient, keys []any, args ...any) *redis.Cmd {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "evalsha", s.sha, len(keys))
	cmdArgs = append(cmdArgs, keys...)
	cmdArgs = append(cmdArgs, args...)
	cmd := redis.NewCmd(ctx, cmdArgs...)
	cmd.SetFirstKeyPos(3) // routes the call to the keys' slot on a Cluster
	_ = rdb.Process(ctx, cmd)
	if err := cmd.Err(); err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")) {
		cmdArgs[0], cmdArgs[1] = "eval", s.src
		cmd = redis.NewCmd(ctx, cmdArgs...)
		cmd.SetFirstKeyPos(3)
		_ = rdb.Process(ctx, cmd)
	}
	return cmd
}
