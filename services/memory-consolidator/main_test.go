package main

import (
	"context"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/svc"
	"github.com/nanofleet/nanofleet/pkg/svc/svctest"
	"github.com/nanofleet/nanofleet/services/memory-consolidator/memoryconsolidator"
)

// TestWaitsForTheCluster: started against a 3-node cluster of which only
// one node runs (no JetStream quorum: nothing can be provisioned), the
// service neither exits nor says it is ready; /readyz says why. Once the
// other nodes start, it provisions its streams with 3 replicas and
// becomes ready, without a restart. It rides out a restart of the whole
// cluster the same way, and stops cleanly when told to.
func TestWaitsForTheCluster(t *testing.T) {
	svctest.WaitsForTheCluster(t, func(ctx context.Context, flags svc.Flags) error {
		return svc.Run(ctx, flags, service("test", ""))
	}, memoryconsolidator.Assets)
}
