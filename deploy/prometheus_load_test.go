package deploy_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	// The DNS service discovery prometheus.yml uses registers its config.
	_ "github.com/prometheus/prometheus/discovery/dns"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// TestPrometheusLoads loads the observability overlay's Prometheus config and
// alerting rules with Prometheus's own loaders, as the server does at start
// (the overlay's images cannot be pulled on the build machines).
func TestPrometheusLoads(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := promconfig.LoadFile(filepath.Join(repoRoot, "deploy/prometheus/prometheus.yml"), false, log)
	if err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	if len(cfg.ScrapeConfigs) == 0 {
		t.Error("prometheus.yml: no scrape configs")
	}
	groups, errs := rulefmt.ParseFile(filepath.Join(repoRoot, "deploy/prometheus/alerts.yml"), false,
		model.UTF8Validation, parser.NewParser(parser.Options{}), log)
	for _, err := range errs {
		t.Errorf("alerts.yml: %v", err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Error("alerts.yml: no rule groups")
	}
}
