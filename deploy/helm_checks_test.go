package deploy_test

import (
	"encoding/json"
	"net"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/nanofleet/nanofleet/pkg/subject"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// checkNames: names and labels are what the API server accepts.
func checkNames(t *testing.T, m *manifest) {
	t.Helper()
	seen := map[string]bool{}
	for _, o := range m.Objects {
		key := o.Kind + "/" + o.Name
		if seen[key] {
			t.Errorf("%s rendered twice", key)
		}
		seen[key] = true
		nameErrs := validation.IsDNS1123Subdomain(o.Name)
		if o.Kind == "v1/Service" {
			nameErrs = validation.IsDNS1035Label(o.Name)
		}
		for _, e := range nameErrs {
			t.Errorf("%s name %q: %s", o.Kind, o.Name, e)
		}
		acc, err := meta.Accessor(o.Value)
		if err != nil {
			continue // custom resources: checked in checkAutoscaling
		}
		if acc.GetNamespace() != releaseNS {
			t.Errorf("%s %s in namespace %q, want %q", o.Kind, o.Name, acc.GetNamespace(), releaseNS)
		}
		checkLabels(t, o.Kind+" "+o.Name, acc.GetLabels())
		for _, want := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
			if acc.GetLabels()[want] == "" {
				t.Errorf("%s %s lacks label %s", o.Kind, o.Name, want)
			}
		}
	}
}

func checkLabels(t *testing.T, what string, l map[string]string) {
	t.Helper()
	for k, v := range l {
		for _, e := range validation.IsQualifiedName(k) {
			t.Errorf("%s: label key %q: %s", what, k, e)
		}
		for _, e := range validation.IsValidLabelValue(v) {
			t.Errorf("%s: label %s=%q: %s", what, k, v, e)
		}
	}
}

// checkDeployments: every pod is locked down, probed and wired as the
// services expect.
func checkDeployments(t *testing.T, m *manifest) {
	t.Helper()
	for _, d := range all[appsv1.Deployment](m) {
		component := d.Labels["app.kubernetes.io/component"]
		if !slices.Contains(services, component) {
			t.Errorf("Deployment %s: component %q is not a nanofleet service", d.Name, component)
			continue
		}
		pod := d.Spec.Template.Spec
		what := "Deployment " + d.Name
		if pod.SecurityContext == nil || !isTrue(pod.SecurityContext.RunAsNonRoot) {
			t.Errorf("%s: pod securityContext.runAsNonRoot is not true", what)
		}
		if !isFalse(pod.AutomountServiceAccountToken) {
			t.Errorf("%s: service account token is mounted; the services never call the API", what)
		}
		if len(pod.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", what, len(pod.Containers))
		}
		c := pod.Containers[0]
		checkContainerSecurity(t, what, component, pod, c)
		checkProbes(t, what, c)

		if !strings.Contains(c.Image, "/"+component+":") || strings.HasSuffix(c.Image, ":") {
			t.Errorf("%s: image %q, want <repository>/%s:<tag>", what, c.Image, component)
		}
		wantArgs := []string{"--prefix=", "--nats=", "--config=/etc/nanofleet/config.json", "--http=:9090"}
		if component == "channel-gateway" {
			wantArgs = append(wantArgs, "--listen=:8080")
		}
		for _, want := range wantArgs {
			if !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, want) }) {
				t.Errorf("%s: args %v lack %s", what, c.Args, want)
			}
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
			t.Errorf("%s: no cpu/memory requests", what)
		}

		mounts := map[string]string{}
		for _, vm := range c.VolumeMounts {
			mounts[vm.MountPath] = vm.Name
			if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name }) {
				t.Errorf("%s: mount %s uses undeclared volume %q", what, vm.MountPath, vm.Name)
			}
		}
		wantMounts := []string{"/tmp", "/etc/nanofleet/config.json"}
		if component == "tool-runner" {
			wantMounts = append(wantMounts, "/workspace")
		}
		for _, a := range c.Args {
			if creds, ok := strings.CutPrefix(a, "--creds="); ok {
				wantMounts = append(wantMounts, path.Dir(creds))
			}
		}
		for _, p := range wantMounts {
			if mounts[p] == "" {
				t.Errorf("%s: nothing mounted at %s", what, p)
			}
		}

		podLabels := labels.Set(d.Spec.Template.Labels)
		for _, tsc := range pod.TopologySpreadConstraints {
			sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
			if err != nil || !sel.Matches(podLabels) {
				t.Errorf("%s: topology spread on %s does not select its own pods (%v)", what, tsc.TopologyKey, err)
			}
		}
		if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 30 {
			t.Errorf("%s: terminationGracePeriodSeconds %v, want at least 30", what, deref(pod.TerminationGracePeriodSeconds))
		}
	}
}

func checkContainerSecurity(t *testing.T, what, component string, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("%s: container has no securityContext", what)
		return
	}
	switch {
	case !isTrue(sc.RunAsNonRoot):
		t.Errorf("%s: container runAsNonRoot is not true", what)
	case sc.RunAsUser == nil || *sc.RunAsUser == 0:
		t.Errorf("%s: container runAsUser %v, want a non-root uid", what, deref(sc.RunAsUser))
	case !isTrue(sc.ReadOnlyRootFilesystem):
		t.Errorf("%s: root filesystem is writable", what)
	case !isFalse(sc.AllowPrivilegeEscalation):
		t.Errorf("%s: allowPrivilegeEscalation is not false", what)
	case isTrue(sc.Privileged):
		t.Errorf("%s: privileged", what)
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
		t.Errorf("%s: capabilities %+v, want drop ALL and add none", what, sc.Capabilities)
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil && pod.SecurityContext != nil {
		seccomp = pod.SecurityContext.SeccompProfile
	}
	if seccomp == nil {
		t.Errorf("%s: no seccomp profile", what)
		return
	}
	// The tool-runner is the one documented exception: bubblewrap needs to
	// create namespaces, which RuntimeDefault forbids (toolRunner.sandbox).
	if component != "tool-runner" && seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccomp %s, want RuntimeDefault", what, seccomp.Type)
	}
	if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount && !isFalse(pod.HostUsers) {
		t.Errorf("%s: procMount Unmasked needs hostUsers: false", what)
	}
}

func checkProbes(t *testing.T, what string, c corev1.Container) {
	t.Helper()
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	if !ports["metrics"] {
		t.Errorf("%s: no port named metrics", what)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"startup", c.StartupProbe, "/healthz"},
		{"liveness", c.LivenessProbe, "/healthz"},
		{"readiness", c.ReadinessProbe, "/readyz"},
	} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			t.Errorf("%s: no HTTP %s probe", what, p.name)
		case p.probe.HTTPGet.Path != p.path:
			t.Errorf("%s: %s probe on %s, want %s", what, p.name, p.probe.HTTPGet.Path, p.path)
		case !ports[p.probe.HTTPGet.Port.String()]:
			t.Errorf("%s: %s probe on port %s, which the container does not declare", what, p.name, p.probe.HTTPGet.Port.String())
		}
	}
}

// checkSelectorsMatch: every selector selects what it is meant to, and the
// named ports it refers to exist there.
func checkSelectorsMatch(t *testing.T, m *manifest) {
	t.Helper()
	deployments := all[appsv1.Deployment](m)
	selected := func(what string, sel *metav1.LabelSelector) []appsv1.Deployment {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Errorf("%s: selector: %v", what, err)
			return nil
		}
		if s.Empty() {
			t.Errorf("%s: empty selector selects every pod in the namespace", what)
		}
		var out []appsv1.Deployment
		for _, d := range deployments {
			if s.Matches(labels.Set(d.Spec.Template.Labels)) {
				out = append(out, d)
			}
		}
		return out
	}
	for _, d := range deployments {
		if got := selected("Deployment "+d.Name, d.Spec.Selector); len(got) != 1 || got[0].Name != d.Name {
			t.Errorf("Deployment %s: selector matches %d Deployments' pods, want only its own", d.Name, len(got))
		}
	}
	pdbFor := map[string]int{}
	for _, p := range all[policyv1.PodDisruptionBudget](m) {
		got := selected("PodDisruptionBudget "+p.Name, p.Spec.Selector)
		if len(got) != 1 {
			t.Errorf("PodDisruptionBudget %s selects %d Deployments, want 1", p.Name, len(got))
		}
		for _, d := range got {
			pdbFor[d.Name]++
		}
		if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
			t.Errorf("PodDisruptionBudget %s sets neither maxUnavailable nor minAvailable", p.Name)
		}
	}
	for name, n := range pdbFor {
		if n > 1 {
			t.Errorf("Deployment %s is covered by %d PodDisruptionBudgets", name, n)
		}
	}
	policyFor := map[string]int{}
	for _, np := range all[networkingv1.NetworkPolicy](m) {
		sel := np.Spec.PodSelector
		got := selected("NetworkPolicy "+np.Name, &sel)
		if len(got) != 1 {
			t.Errorf("NetworkPolicy %s selects %d Deployments, want 1", np.Name, len(got))
			continue
		}
		policyFor[got[0].Name]++
		ports := containerPortNames(got[0].Spec.Template.Spec)
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port != nil && p.Port.IntVal == 0 && !slices.Contains(ports, p.Port.StrVal) {
					t.Errorf("NetworkPolicy %s admits port %q, which %s does not declare", np.Name, p.Port.StrVal, got[0].Name)
				}
			}
		}
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || len(np.Spec.Egress) == 0 {
			t.Errorf("NetworkPolicy %s does not restrict egress", np.Name)
		}
		if !allowsEgressPort(np, 53) {
			t.Errorf("NetworkPolicy %s blocks DNS", np.Name)
		}
		if !allowsEgressPort(np, 4222) {
			t.Errorf("NetworkPolicy %s blocks NATS", np.Name)
		}
	}
	if len(policyFor) > 0 {
		for _, d := range deployments {
			if policyFor[d.Name] != 1 {
				t.Errorf("Deployment %s is selected by %d NetworkPolicies, want 1", d.Name, policyFor[d.Name])
			}
		}
	}
	for _, svc := range all[corev1.Service](m) {
		got := selected("Service "+svc.Name, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
		if len(got) != 1 || got[0].Labels["app.kubernetes.io/component"] != "channel-gateway" {
			t.Errorf("Service %s selects %d Deployments, want the channel-gateway", svc.Name, len(got))
			continue
		}
		ports := containerPortNames(got[0].Spec.Template.Spec)
		for _, p := range svc.Spec.Ports {
			if !slices.Contains(ports, p.TargetPort.String()) {
				t.Errorf("Service %s: targetPort %s is not a port of %s (%v)", svc.Name, p.TargetPort.String(), got[0].Name, ports)
			}
		}
	}
	for _, pm := range m.custom("monitoring.coreos.com/v1/PodMonitor") {
		var spec struct {
			Selector            metav1.LabelSelector `json:"selector"`
			PodMetricsEndpoints []struct {
				Port string `json:"port"`
				Path string `json:"path"`
			} `json:"podMetricsEndpoints"`
		}
		remarshal(t, pm["spec"], &spec)
		if got := selected("PodMonitor", &spec.Selector); len(got) != len(deployments) {
			t.Errorf("PodMonitor selects %d of %d Deployments", len(got), len(deployments))
		}
		if len(spec.PodMetricsEndpoints) != 1 || spec.PodMetricsEndpoints[0].Port != "metrics" || spec.PodMetricsEndpoints[0].Path != "/metrics" {
			t.Errorf("PodMonitor endpoints %+v, want port metrics, path /metrics", spec.PodMetricsEndpoints)
		}
	}
}

func allowsEgressPort(np networkingv1.NetworkPolicy, port int32) bool {
	for _, rule := range np.Spec.Egress {
		if len(rule.Ports) == 0 {
			return true
		}
		for _, p := range rule.Ports {
			if p.Port != nil && p.Port.IntVal == port {
				return true
			}
		}
	}
	return false
}

// checkReferences: everything a pod or a route names is rendered by the
// chart or is one of the Secrets the values say the operator provides
// (external).
func checkReferences(t *testing.T, m *manifest, external []string) {
	t.Helper()
	has := func(kind, name string) bool {
		return slices.ContainsFunc(m.Objects, func(o object) bool { return o.Kind == kind && o.Name == name })
	}
	secretExists := func(name string) bool { return has("v1/Secret", name) || slices.Contains(external, name) }
	for _, d := range all[appsv1.Deployment](m) {
		pod := d.Spec.Template.Spec
		what := "Deployment " + d.Name
		if sa := pod.ServiceAccountName; sa != "" && sa != "default" && !has("v1/ServiceAccount", sa) {
			t.Errorf("%s: service account %s is not rendered", what, sa)
		}
		for _, v := range pod.Volumes {
			switch {
			case v.ConfigMap != nil && !has("v1/ConfigMap", v.ConfigMap.Name):
				t.Errorf("%s: volume %s: ConfigMap %s is not rendered", what, v.Name, v.ConfigMap.Name)
			case v.PersistentVolumeClaim != nil && !has("v1/PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName):
				t.Errorf("%s: volume %s: claim %s is not rendered", what, v.Name, v.PersistentVolumeClaim.ClaimName)
			case v.Secret != nil && !secretExists(v.Secret.SecretName):
				t.Errorf("%s: volume %s: Secret %q is neither rendered nor provided by the operator", what, v.Name, v.Secret.SecretName)
			}
		}
		for _, e := range pod.Containers[0].Env {
			if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
				if !secretExists(ref.SecretKeyRef.Name) {
					t.Errorf("%s: env %s reads Secret %q, which is neither rendered nor provided by the operator", what, e.Name, ref.SecretKeyRef.Name)
				}
				if ref.SecretKeyRef.Key != e.Name {
					t.Errorf("%s: env %s reads key %s", what, e.Name, ref.SecretKeyRef.Key)
				}
			}
		}
	}
	for _, ing := range all[networkingv1.Ingress](m) {
		for _, r := range ing.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				svc := p.Backend.Service
				if svc == nil || !has("v1/Service", svc.Name) {
					t.Errorf("Ingress %s routes to a Service that is not rendered: %+v", ing.Name, p.Backend)
					continue
				}
				for _, s := range all[corev1.Service](m) {
					if s.Name == svc.Name && !slices.ContainsFunc(s.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == svc.Port.Name }) {
						t.Errorf("Ingress %s routes to port %q, which Service %s does not have", ing.Name, svc.Port.Name, s.Name)
					}
				}
			}
		}
	}
	// Pods of a chart that creates its Secret read only keys it holds.
	for _, s := range all[corev1.Secret](m) {
		for k := range s.StringData {
			for _, e := range validation.IsEnvVarName(k) {
				t.Errorf("Secret %s: key %s: %s", s.Name, k, e)
			}
		}
	}
}

// scaledObject is the part of KEDA's ScaledObject the chart sets; it is
// decoded strictly, so a misspelt field fails.
type scaledObject struct {
	ScaleTargetRef struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Name       string `json:"name"`
	} `json:"scaleTargetRef"`
	MinReplicaCount int32 `json:"minReplicaCount"`
	MaxReplicaCount int32 `json:"maxReplicaCount"`
	PollingInterval int32 `json:"pollingInterval"`
	CooldownPeriod  int32 `json:"cooldownPeriod"`
	Fallback        struct {
		FailureThreshold int32 `json:"failureThreshold"`
		Replicas         int32 `json:"replicas"`
	} `json:"fallback"`
	Advanced struct {
		HorizontalPodAutoscalerConfig struct {
			Behavior autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior"`
		} `json:"horizontalPodAutoscalerConfig"`
	} `json:"advanced"`
	Triggers []struct {
		Type     string            `json:"type"`
		Metadata map[string]string `json:"metadata"` // KEDA wants every value a string
	} `json:"triggers"`
}

// checkAutoscaling: the agent workers are scaled by exactly one of KEDA
// (on the inbound consumer's lag) or an HPA, or have a fixed replica count.
func checkAutoscaling(t *testing.T, m *manifest, prefix string) {
	t.Helper()
	space := subject.MustSpace(prefix)
	worker := deployment(t, m, workerDeploy)
	sos := m.custom("keda.sh/v1alpha1/ScaledObject")
	hpas := all[autoscalingv2.HorizontalPodAutoscaler](m)
	if len(sos)+len(hpas) > 1 {
		t.Fatalf("%d ScaledObjects and %d HPAs: two autoscalers fight over the workers", len(sos), len(hpas))
	}
	if autoscaled := len(sos)+len(hpas) == 1; autoscaled == (worker.Spec.Replicas != nil) {
		t.Errorf("agent-worker replicas set: %v, autoscaled: %v; the Deployment must leave replicas to the autoscaler and only to it", worker.Spec.Replicas != nil, autoscaled)
	}
	for _, so := range sos {
		var spec scaledObject
		strictRemarshal(t, so["spec"], &spec)
		if spec.ScaleTargetRef.Name != worker.Name || spec.ScaleTargetRef.Kind != "Deployment" {
			t.Errorf("ScaledObject targets %+v, want Deployment %s", spec.ScaleTargetRef, worker.Name)
		}
		if spec.MinReplicaCount < 1 || spec.MinReplicaCount > spec.MaxReplicaCount {
			t.Errorf("ScaledObject replicas %d..%d", spec.MinReplicaCount, spec.MaxReplicaCount)
		}
		if len(spec.Triggers) != 1 || spec.Triggers[0].Type != "nats-jetstream" {
			t.Fatalf("ScaledObject triggers %+v, want one nats-jetstream trigger", spec.Triggers)
		}
		md := spec.Triggers[0].Metadata
		if md["stream"] != space.InboundStream() || md["consumer"] != space.WorkerConsumer() {
			t.Errorf("ScaledObject scales on %s/%s, want %s/%s", md["stream"], md["consumer"], space.InboundStream(), space.WorkerConsumer())
		}
		if _, port, err := net.SplitHostPort(md["natsServerMonitoringEndpoint"]); err != nil || port == "" {
			t.Errorf("natsServerMonitoringEndpoint %q is not host:port: %v", md["natsServerMonitoringEndpoint"], err)
		}
		for _, k := range []string{"account", "lagThreshold"} {
			if md[k] == "" {
				t.Errorf("ScaledObject trigger lacks %s", k)
			}
		}
	}
	for _, h := range hpas {
		if h.Spec.ScaleTargetRef.Name != worker.Name || h.Spec.ScaleTargetRef.Kind != "Deployment" {
			t.Errorf("HPA targets %+v, want Deployment %s", h.Spec.ScaleTargetRef, worker.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			t.Errorf("HPA replicas %v..%d", deref(h.Spec.MinReplicas), h.Spec.MaxReplicas)
		}
		if len(h.Spec.Metrics) == 0 {
			t.Error("HPA has no metrics")
		}
	}
}

func remarshal(t *testing.T, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

func strictRemarshal(t *testing.T, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func isTrue(b *bool) bool  { return b != nil && *b }
func isFalse(b *bool) bool { return b != nil && !*b }
