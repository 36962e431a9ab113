package redisinv

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill/internal/testkit/testenv"
	"github.com/seckill-go/seckill/lock"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		want Endpoint
	}{
		{"redis://127.0.0.1:6379/0", Endpoint{Addrs: []string{"127.0.0.1:6379"}}},
		{"redis://localhost", Endpoint{Addrs: []string{"localhost:6379"}}},
		{"redis://:s%40cret@h:1/3", Endpoint{Addrs: []string{"h:1"}, Password: "s@cret", DB: 3}},
		{"rediss://user:pw@h:6380", Endpoint{Addrs: []string{"h:6380"}, Username: "user", Password: "pw", TLS: true}},
		{"redis://h1:7001,h2:7002,h3", Endpoint{Addrs: []string{"h1:7001", "h2:7002", "h3:6379"}, Cluster: true}},
		{"redis://h1:7001?cluster=1", Endpoint{Addrs: []string{"h1:7001"}, Cluster: true}},
		{"redis://[::1]:6379", Endpoint{Addrs: []string{"[::1]:6379"}}},
		// Sentinel: the addresses are the sentinels' (default port 26379); one is allowed;
		// user and password are the master's, sentinel_password the sentinels'.
		{"redis://s1:26379,s2:26380,s3/2?master_set=mymaster",
			Endpoint{Addrs: []string{"s1:26379", "s2:26380", "s3:26379"}, DB: 2, MasterSet: "mymaster"}},
		{"redis://s1?master_set=m", Endpoint{Addrs: []string{"s1:26379"}, MasterSet: "m"}},
		{"rediss://u:p%26w@s1:5000?master_set=m&sentinel_password=s%26p&cluster=0",
			Endpoint{Addrs: []string{"s1:5000"}, Username: "u", Password: "p&w", TLS: true, MasterSet: "m", SentinelPassword: "s&p"}},
	} {
		got, err := ParseURL(c.url)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", c.url, got, err, c.want)
		}
	}
	for _, bad := range []string{
		"127.0.0.1:6379", "http://h", "redis://", "redis://h:0", "redis://h:99999", "redis://h/16",
		"redis://h/x", "redis://h1,h2/1", "redis://h?cluster=maybe", "redis://h?timeout=1",
		"redis://user:topsecret@h:x",
		"redis://s1,s2?master_set=m&cluster=1", "redis://s1?master_set=", "redis://s1?master_set=a&master_set=b",
		"redis://s1/16?master_set=m", "redis://h?sentinel_password=topsecret",
		"redis://s1?master_set=m&sentinel_password=topsecret&bogus=1",
		"redis://s1?master_set=m&sentinel_password=top%zzsecret",
		"redis://s1?master_set=m;sentinel_password=topsecret",
		"redis://:topsecret@?master_set=m", "ftp://:topsecret@h?sentinel_password=topsecret",
	} {
		_, err := ParseURL(bad)
		if err == nil {
			t.Errorf("ParseURL(%q) = nil error", bad)
		} else if strings.Contains(err.Error(), "topsecret") {
			t.Errorf("ParseURL(%q) leaks the password: %v", bad, err)
		}
	}
}

// TestDialDetectsCluster: a cluster named by one node only is still used as a cluster.
func TestDialDetectsCluster(t *testing.T) {
	url := testenv.RedisCluster(t)
	ep, err := ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := dialT(t, "redis://"+ep.Addrs[0])
	if !c.Cluster || len(c.Inventory.Nodes()) < 3 {
		t.Fatalf("Dial(one node of %s): cluster %v with %d nodes; want the whole cluster", url, c.Cluster, len(c.Inventory.Nodes()))
	}
	locks := lock.New(c.Locks, &lock.Options{Prefix: "seckilltest:dial:"}) // the locks work over it too
	defer locks.Close()
	m := locks.NewMutex(t.Name())
	if _, err := m.TryLock(t.Context(), 0, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := dialT(t, testenv.Redis(t))
	if s.Cluster {
		t.Fatalf("standalone server reported as a cluster")
	}
}
