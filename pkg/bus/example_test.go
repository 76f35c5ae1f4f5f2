package bus_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/embeddednats"
	"github.com/nanofleet/nanofleet/pkg/subject"
)

// A package that keeps state in JetStream declares its assets once, and
// only opens them; the service that uses the package passes the
// declaration to Provision at start-up (a channel adapter adds its own to
// channels.Assets).
func ExampleProvision() {
	// In the package that owns the bucket:
	assets := func(sp subject.Space, _ bus.Layout) bus.Assets {
		return bus.Assets{Buckets: []jetstream.KeyValueConfig{{
			Bucket: sp.Bucket("example"), Description: "what the example adapter keeps", History: 1,
		}}}
	}

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	srv, err := embeddednats.Start(embeddednats.Config{StoreDir: dir, NoListen: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{}, srv.ConnectOption())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	// In the service, at start-up: the core layout and the declared assets,
	// all with the configured replicas.
	if err := bus.Provision(ctx, b, bus.DefaultLayout(), assets); err != nil {
		fmt.Println(err)
		return
	}
	// In the package: open, never create.
	kv, err := b.KV(ctx, "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	status, _ := kv.Status(ctx)
	fmt.Println(status.Bucket(), "replicas:", status.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas)
	// Output: NANOFLEET_example replicas: 1
}
