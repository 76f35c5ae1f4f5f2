package bench

import (
	"context"
	"os"
	"time"

	"github.com/nanofleet/nanofleet/pkg/config"
	"github.com/nanofleet/nanofleet/pkg/llm/llmtest"
	"github.com/nanofleet/nanofleet/services/nanofleet/fleet"
)

// bed is what a fleet under test runs on: a temporary directory, the
// fake model, a workspace and the fleet's config file in that directory.
type bed struct {
	dir, ws string
	model   *llmtest.Server
	cfgPath string
	file    *config.File
}

// newBed prepares a bed in a new directory under the driver's, named
// after prefix. The model answers after latency, calling a tool first if
// tool; fs gets the model's URL. close undoes it all.
func (r *driver) newBed(prefix string, latency time.Duration, tool bool, fs fleetSettings) (_ *bed, err error) {
	dir, err := os.MkdirTemp(r.tmp, prefix)
	if err != nil {
		return nil, err
	}
	b := &bed{dir: dir}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if b.model, err = startModel(latency, tool); err != nil {
		return nil, err
	}
	if b.ws, err = prepareWorkspace(dir); err != nil {
		return nil, err
	}
	fs.modelURL = b.model.URL()
	if b.cfgPath, b.file, err = fs.write(dir); err != nil {
		return nil, err
	}
	return b, nil
}

// scenarioBed is the bed for sc: its model, and its slots and limit in
// the worker section.
func (r *driver) scenarioBed(prefix string, sc scenario) (*bed, error) {
	return r.newBed(prefix, sc.latency, sc.tool, fleetSettings{slots: sc.slots, limit: sc.limit})
}

func (b *bed) close() {
	if b.model != nil {
		b.model.Close()
	}
	os.RemoveAll(b.dir)
}

// connect is the load generator's client of the fleet whose NATS is at
// url; close closes the client, then its connection.
func connect(ctx context.Context, url string, file *config.File) (_ *fleet.Client, close func(), err error) {
	b, err := dial(ctx, url, file)
	if err != nil {
		return nil, nil, err
	}
	c, err := fleet.NewClient(ctx, b, "bench")
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return c, func() { c.Close(); b.Close() }, nil
}
