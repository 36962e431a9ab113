package sinks_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/seckill-go/seckill/events"
	"github.com/seckill-go/seckill/events/sinks"
)

// TestOpenAllMultiBrokerKafka opens the list docs/EVENTS.md shows: a Kafka URL whose host
// part is a comma-separated list of brokers, between other sinks. Each URL is one sink, and
// the Kafka one has all three brokers (kafkasink does not contact them at Open).
func TestOpenAllMultiBrokerKafka(t *testing.T) {
	list := "https://shop.example/hooks/seckill," +
		"kafka://k1:9092,k2:9092,k3:9092?topic=shop.seckill&timeout=30s&client_id=shop-seckill, " +
		"kafka://k4:9092"
	ss, err := sinks.OpenAll(context.Background(), list, events.Options{Secret: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatalf("OpenAll: %v", err)
	}
	defer func() {
		for _, s := range ss {
			_ = s.Close()
		}
	}()
	var names []string
	for _, s := range ss {
		names = append(names, s.Name())
	}
	want := []string{
		"https://shop.example/hooks/seckill",
		"kafka://k1:9092,k2:9092,k3:9092?client_id=shop-seckill&timeout=30s&topic=shop.seckill",
		"kafka://k4:9092",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("sinks %q, want %q", names, want)
	}
}

// TestSplit cuts a list only before a URL's scheme: a comma inside a URL (Kafka's brokers, a
// query value) stays in it, and a list item without a scheme is kept whole for Open to refuse.
func TestSplit(t *testing.T) {
	for _, c := range []struct {
		list string
		want []string
	}{
		{"", nil},
		{" , ", nil},
		{"nats://n:4222", []string{"nats://n:4222"}},
		{"kafka://a:1,b:2,c:3?topic=t,amqp://mq/", []string{"kafka://a:1,b:2,c:3?topic=t", "amqp://mq/"}},
		{"http://h/a?x=1,2 , HTTPS://h/b,", []string{"http://h/a?x=1,2", "HTTPS://h/b"}},
		{"nats://n:4222,,k2:9092", []string{"nats://n:4222,,k2:9092"}},
		{"k1:9092,kafka://k2:9092", []string{"k1:9092", "kafka://k2:9092"}},
		{"git+ssh://x,a.b-c://y", []string{"git+ssh://x", "a.b-c://y"}},
		{"http://h/,1x://y", []string{"http://h/,1x://y"}},
	} {
		if got := sinks.Split(c.list); !slices.Equal(got, c.want) {
			t.Errorf("Split(%q) = %q, want %q", c.list, got, c.want)
		}
	}
}

// TestOpenAllBadEntry: an entry that is no URL still fails the start, naming it.
func TestOpenAllBadEntry(t *testing.T) {
	_, err := sinks.OpenAll(context.Background(), "k1:9092,kafka://k2:9092", events.Options{})
	if !errors.Is(err, events.ErrBadURL) {
		t.Fatalf("OpenAll: %v, want ErrBadURL", err)
	}
}

// TestOpenAllNames: each sink is labelled by its name= option, else by its scheme and place in
// the list; the option is not part of the sink's identity (Name); a name that is not an id,
// given twice, or shared by two sinks is refused.
func TestOpenAllNames(t *testing.T) {
	opts := events.Options{Secret: []byte("0123456789abcdef0123456789abcdef")}
	ss, err := sinks.OpenAll(context.Background(), "https://h/a?timeout=5s&name=orders,kafka://k:9092,https://h/b", opts)
	if err != nil {
		t.Fatal(err)
	}
	var labels, names []string
	for _, s := range ss {
		labels, names = append(labels, events.LabelOf(s)), append(names, s.Name())
		_ = s.Close()
	}
	if want := []string{"orders", "kafka-1", "https-2"}; !slices.Equal(labels, want) {
		t.Errorf("labels %q, want %q", labels, want)
	}
	if want := []string{"https://h/a?timeout=5s", "kafka://k:9092", "https://h/b"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	for _, bad := range []string{"https://h/a?name=a/b", "https://h/a?name=", "https://h/a?name=..", "https://h/a?name=x&name=y",
		"https://h/a?name=x,https://h/b?name=x", "https://h/a,https://h/b?name=https-0"} {
		if _, err := sinks.OpenAll(context.Background(), bad, opts); !errors.Is(err, events.ErrBadURL) {
			t.Errorf("OpenAll(%q): %v, want ErrBadURL", bad, err)
		}
	}
}
