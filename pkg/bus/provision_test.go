package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

func bucket(name string, ttl time.Duration) bus.Declare {
	return bus.KeyValue(jetstream.KeyValueConfig{Bucket: name, TTL: ttl})
}

func TestDeclared(t *testing.T) {
	sp, err := subject.NewSpace("")
	if err != nil {
		t.Fatal(err)
	}
	core := len(bus.CoreAssets(sp, bus.DefaultLayout()).List())
	tests := []struct {
		name    string
		decls   []bus.Declare
		want    int // assets besides the core ones
		wantErr error
	}{
		{"core only", nil, 0, nil},
		{"one bucket", []bus.Declare{bucket("x", 0)}, 1, nil},
		{"joined", []bus.Declare{bus.Join(bucket("x", 0), bucket("y", 0))}, 2, nil},
		{"same bucket twice the same way", []bus.Declare{bucket("x", time.Hour), bucket("x", time.Hour)}, 1, nil},
		{"one declaration used twice", func() []bus.Declare { x := bucket("x", 0); return []bus.Declare{x, x} }(), 1, nil},
		{"same bucket twice differently", []bus.Declare{bucket("x", time.Hour), bucket("x", time.Minute)}, 0, bus.ErrLayout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := bus.DefaultLayout()
			l.Replicas = 3
			all, err := bus.Declared(sp, l, tt.decls...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Declared = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if n := len(all.List()) - core; n != tt.want {
				t.Errorf("%d assets besides the core, want %d", n, tt.want)
			}
			for _, c := range all.Streams {
				if c.Replicas != 3 {
					t.Errorf("stream %s: %d replicas, want the layout's 3", c.Name, c.Replicas)
				}
			}
			for _, c := range all.Buckets {
				if c.Replicas != 3 {
					t.Errorf("bucket %s: %d replicas, want the layout's 3", c.Bucket, c.Replicas)
				}
			}
			for _, c := range all.Objects {
				if c.Replicas != 3 {
					t.Errorf("object store %s: %d replicas, want the layout's 3", c.Bucket, c.Replicas)
				}
			}
		})
	}
}

// TestCheckLayoutChangesNothing: a client's check names what is missing
// and creates nothing; provisioning then creates it.
func TestCheckLayoutChangesNothing(t *testing.T) {
	b := bustest.StartJetStream(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	extra := bucket("extra", 0)
	for range 2 { // the second check sees the same: the first created nothing
		diffs, err := bus.CheckLayout(ctx, b, bustest.TestLayout(), extra)
		if err != nil {
			t.Fatal(err)
		}
		if len(diffs) != 1 || !diffs[0].Missing || diffs[0].Asset.Name != "NANOFLEET_extra" {
			t.Fatalf("CheckLayout = %v, want only bucket NANOFLEET_extra missing", diffs)
		}
	}
	if err := bus.Provision(ctx, b, bustest.TestLayout(), extra); err != nil {
		t.Fatal(err)
	}
	if diffs, err := bus.CheckLayout(ctx, b, bustest.TestLayout(), extra); err != nil || len(diffs) != 0 {
		t.Errorf("after Provision: %v, %v; want no differences", diffs, err)
	}
}

// TestCheckLayoutKeepsOrder: the buckets missing from a provisioned
// server are named once each, in the order they are declared, although
// CheckLayout asks for every asset at once.
func TestCheckLayoutKeepsOrder(t *testing.T) {
	b := bustest.StartJetStream(t) // the core layout provisioned
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var decls []bus.Declare
	var want []string
	for i := range 12 {
		decls = append(decls, bucket(fmt.Sprint("extra", i), 0))
		want = append(want, fmt.Sprint("NANOFLEET_extra", i))
	}
	for range 3 {
		diffs, err := bus.CheckLayout(ctx, b, bustest.TestLayout(), decls...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range diffs {
			if !d.Missing {
				t.Errorf("%v: want only missing buckets", d)
			}
			got = append(got, d.Asset.Name)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("missing %v, want %v", got, want)
		}
	}
}

// TestProvisionNeverLowersReplicas: on a 3-node cluster, provisioning
// raises an existing layout's replicas in place, and refuses to lower
// them, naming nats.replicas, with every asset left as it was. Before,
// a service started with the default nats.replicas of 1 took a cluster's
// R3 fleet down to R1 without a word.
func TestProvisionNeverLowersReplicas(t *testing.T) {
	cluster := bustest.StartCluster(t, 3)
	for _, tc := range []struct {
		prefix        string
		first, second int
		refused       bool
		want          int
	}{
		{prefix: "raise", first: 1, second: 3, want: 3},
		{prefix: "lower", first: 3, second: 1, refused: true, want: 3},
		{prefix: "same", first: 3, second: 3, want: 3},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			l := bustest.TestLayout()
			l.Replicas = tc.first
			b := cluster.Connect(t, tc.prefix, l)
			l.Replicas = tc.second
			err := bus.Provision(ctx, b, l)
			if tc.refused != (err != nil) || (err != nil && !(errors.Is(err, bus.ErrLayout) && errors.Is(err, config.ErrInvalid))) {
				t.Fatalf("provision R%d over R%d: %v, want refused %v (ErrLayout and config.ErrInvalid)", tc.second, tc.first, err, tc.refused)
			}
			var bad *config.Error
			if err != nil && (!errors.As(err, &bad) || bad.Key != "nats.replicas") {
				t.Errorf("refusal does not name nats.replicas: %v", err)
			}
			all, err := bus.Declared(b.Space, l)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range all.List() {
				s, err := b.JS.Stream(ctx, a.Stream)
				if err != nil {
					t.Fatalf("%s %s: %v", a.Kind, a.Name, err)
				}
				if r := s.CachedInfo().Config.Replicas; r != tc.want {
					t.Errorf("%s %s has %d replicas, want %d", a.Kind, a.Name, r, tc.want)
				}
			}
		})
	}
}
