package deploy_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nanofleet/nanofleet/pkg/observe"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// targetLabels are attached by the scrape, not by the services.
var targetLabels = []string{"instance", "job", "service", "fleet"}

// fleetMetrics returns every series name pkg/observe registers (histograms
// as their _bucket, _sum and _count series) with its label names.
func fleetMetrics(t *testing.T) map[string][]string {
	t.Helper()
	m := observe.NewMetrics(nil)
	descRE := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	out := map[string][]string{"up": nil}
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		if !ok {
			t.Fatalf("observe.Metrics.%s is not a collector", v.Type().Field(i).Name)
		}
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		var d *prometheus.Desc
		select { // Describe has returned: its description is there or never comes
		case d = <-ch:
		default:
			t.Fatalf("observe.Metrics.%s describes nothing", v.Type().Field(i).Name)
		}
		match := descRE.FindStringSubmatch(d.String())
		if match == nil {
			t.Fatalf("cannot read %s", d)
		}
		name := match[1]
		var labels []string
		if match[2] != "" {
			labels = strings.Split(match[2], ",")
		}
		if _, isHist := c.(prometheus.Histogram); isHist || strings.Contains(fmt.Sprintf("%T", c), "Histogram") {
			out[name+"_bucket"] = append(slices.Clone(labels), "le")
			out[name+"_sum"] = labels
			out[name+"_count"] = labels
			continue
		}
		out[name] = labels
	}
	return out
}

// grafanaVars are replaced by Grafana before a query reaches Prometheus.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// checkQuery parses a PromQL expression and checks that it reads only
// fleet metrics, by labels they have.
func checkQuery(t *testing.T, where, expr string, metrics map[string][]string) (used []string) {
	t.Helper()
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		t.Errorf("%s: %q: %v", where, expr, err)
		return nil
	}
	parser.Inspect(ast, func(node parser.Node, path []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			labels, known := metrics[n.Name]
			if !known {
				t.Errorf("%s: %q reads %s, which no service exports", where, expr, n.Name)
				return nil
			}
			used = append(used, n.Name)
			for _, lm := range n.LabelMatchers {
				if lm.Name != "__name__" && !slices.Contains(labels, lm.Name) && !slices.Contains(targetLabels, lm.Name) {
					t.Errorf("%s: %q filters %s on label %q, which it does not have (%v)", where, expr, n.Name, lm.Name, labels)
				}
			}
		case *parser.AggregateExpr:
			if n.Without {
				return nil
			}
			var have []string
			parser.Inspect(n.Expr, func(inner parser.Node, _ []parser.Node) error {
				if vs, ok := inner.(*parser.VectorSelector); ok {
					have = append(have, metrics[vs.Name]...)
				}
				return nil
			})
			for _, g := range n.Grouping {
				if !slices.Contains(have, g) && !slices.Contains(targetLabels, g) {
					t.Errorf("%s: %q groups by %q, which its metrics do not have (%v)", where, expr, g, have)
				}
			}
		}
		return nil
	})
	return used
}

type grafanaDashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []grafanaVar `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaVar struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func TestGrafanaDashboard(t *testing.T) {
	metrics := fleetMetrics(t)
	var d grafanaDashboard
	if err := json.Unmarshal(readFile(t, "deploy/grafana/dashboards/nanofleet.json"), &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("dashboard has no uid or title")
	}
	if !slices.ContainsFunc(d.Templating.List, func(v grafanaVar) bool {
		return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	}) {
		t.Error("no datasource variable: the dashboard would only work with one named data source")
	}

	used := map[string]bool{}
	ids := map[int]bool{}
	var cells [][2]int // occupied (x, y) grid cells
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if slices.Contains(cells, [2]int{x, y}) {
					t.Errorf("panel %q overlaps another at (%d, %d)", p.Title, x, y)
					x, y = g.X+g.W, g.Y+g.H
				}
				cells = append(cells, [2]int{x, y})
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range checkQuery(t, "panel "+p.Title, tg.Expr, metrics) {
				used[name] = true
			}
		}
	}
	for name := range metrics {
		base := strings.TrimSuffix(strings.TrimSuffix(name, "_sum"), "_count")
		if base != name || used[name] {
			continue // a histogram's _sum/_count need no panel of their own
		}
		t.Errorf("no panel shows %s", name)
	}
}

type relabelConfig struct {
	SourceLabels []string `json:"source_labels"`
	TargetLabel  string   `json:"target_label"`
}

func TestPrometheusConfig(t *testing.T) {
	var cfg struct {
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName      string `json:"job_name"`
			MetricsPath  string `json:"metrics_path"`
			DNSSDConfigs []struct {
				Names []string `json:"names"`
				Type  string   `json:"type"`
				Port  int      `json:"port"`
			} `json:"dns_sd_configs"`
			RelabelConfigs []relabelConfig `json:"relabel_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(readFile(t, "deploy/prometheus/prometheus.yml"), &cfg); err != nil {
		t.Fatal(err)
	}
	var scraped []string
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName != "nanofleet" {
			continue
		}
		if sc.MetricsPath != "/metrics" {
			t.Errorf("metrics_path %q", sc.MetricsPath)
		}
		for _, dns := range sc.DNSSDConfigs {
			if dns.Port != 9090 || dns.Type != "A" {
				t.Errorf("dns_sd %+v: want A records on port 9090", dns)
			}
			scraped = append(scraped, dns.Names...)
		}
		if !slices.ContainsFunc(sc.RelabelConfigs, func(r relabelConfig) bool {
			return r.TargetLabel == "service"
		}) {
			t.Error("targets get no service label; the dashboard groups by it")
		}
	}
	slices.Sort(scraped)
	want := slices.Sorted(slices.Values(services))
	if !slices.Equal(scraped, want) {
		t.Errorf("Prometheus scrapes %v, want every service %v", scraped, want)
	}
	// docker-compose.observability.yml mounts deploy/prometheus at /etc/prometheus.
	if !slices.Equal(cfg.RuleFiles, []string{"/etc/prometheus/alerts.yml"}) {
		t.Errorf("rule_files %v, want /etc/prometheus/alerts.yml", cfg.RuleFiles)
	}
}

func TestPrometheusAlerts(t *testing.T) {
	metrics := fleetMetrics(t)
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(readFile(t, "deploy/prometheus/alerts.yml"), &rules); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			checkQuery(t, "alert "+r.Alert, r.Expr, metrics)
			if r.Alert == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q: want an alert name and a summary", r.Expr)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s: severity %q", r.Alert, s)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerting rules")
	}
}

func TestGrafanaProvisioning(t *testing.T) {
	var ds struct {
		Datasources []struct {
			Name, Type, URL, UID string
		} `json:"datasources"`
	}
	if err := yaml.Unmarshal(readFile(t, "deploy/grafana/provisioning/datasources/prometheus.yml"), &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("datasources %+v, want the compose prometheus service at http://prometheus:9090", ds.Datasources)
	}
	var dash struct {
		Providers []struct {
			Type    string `json:"type"`
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	if err := yaml.Unmarshal(readFile(t, "deploy/grafana/provisioning/dashboards/nanofleet.yml"), &dash); err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, nil, "docker-compose.yml", "docker-compose.observability.yml")
	graf := service(t, p, "grafana")
	for _, prov := range dash.Providers {
		if !slices.ContainsFunc(graf.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == prov.Options.Path }) {
			t.Errorf("dashboard provider reads %s, where compose mounts nothing", prov.Options.Path)
		}
	}
	if len(dash.Providers) == 0 {
		t.Error("no dashboard provider")
	}
}
