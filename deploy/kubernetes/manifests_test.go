package kubernetes_test

// The manifests are checked offline: no cluster runs here. Every YAML
// document under this directory is decoded strictly (duplicate keys and
// unknown fields are errors, as `kubectl apply --validate=strict` makes
// them) into the k8s.io/api type of its kind, and the set is then checked
// for what a cluster would only show at run time, one sentinel per concern
// so that TestCheckerCatchesBrokenManifests can say which check caught a
// broken copy. Kustomizations are decoded into the subset of kustomize's
// Kustomization these files use (an unknown field is an error there too);
// their resources and patches must exist.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// The checks, each a sentinel that the errors of its check wrap.
var (
	errDecode        = errors.New("manifest does not decode strictly")
	errKustomization = errors.New("kustomization names what is not there")
	errProbe         = errors.New("probe")
	errGrace         = errors.New("termination grace not longer than the drain")
	errSelector      = errors.New("selector")
	errService       = errors.New("service")
	errPDB           = errors.New("pod disruption budget")
	errSecret        = errors.New("secret not by reference")
	errImage         = errors.New("image not pinned")
	errSecurity      = errors.New("security context")
	errConfig        = errors.New("agent folder")
	errSibling       = errors.New("sibling not reached through its Service")
	errToken         = errors.New("agent serves without a token")
)

const (
	livenessPath  = "/healthz"
	readinessPath = "/readyz"
	// defaultDrainGrace is `agent serve --shutdown-grace`'s default: the
	// drain a Deployment gets when its args do not name one.
	defaultDrainGrace = 25 * time.Second
)

// secretName is an environment variable whose value is a secret: it must
// come from a Secret (valueFrom.secretKeyRef), never be written as value.
var secretName = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSWORD|API_KEY|_KEY$|DATABASE_URL)`)

// object is one decoded document.
type object struct {
	file string // slash-separated, relative to the root
	doc  int    // 1-based, in its file
	obj  any    // *appsv1.Deployment, *corev1.Service, ...
}

func (o object) String() string { return fmt.Sprintf("%s (document %d)", o.file, o.doc) }

// kustomization is the part of kustomize's Kustomization
// (kustomize.config.k8s.io/v1beta1) that these manifests use. Decoded
// strictly: a field outside it is an error, to be added here knowingly.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
	Patches []struct {
		Path   string `json:"path"`
		Target *struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target,omitempty"`
	} `json:"patches,omitempty"`
}

// manifests is everything under one root.
type manifests struct {
	root    string
	objects []object // full objects, checked for every invariant
	patches []object // documents that kustomizations name as patches
	kusts   map[string]*kustomization
}

// newObject returns a pointer to the typed object for a document's
// apiVersion and kind; nil for a kind the checker does not know (an error:
// a new kind comes with its checks).
func newObject(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "v1 Service":
		return &corev1.Service{}
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Secret":
		return &corev1.Secret{}
	case "v1 Namespace":
		return &corev1.Namespace{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	}
	return nil
}

// docSeparator splits a multi-document YAML file.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeStrict decodes one YAML document into v: duplicate keys
// (YAMLToJSONStrict), unknown fields and trailing data are errors.
func decodeStrict(doc []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("data after the object")
	}
	return nil
}

// load reads every .yaml file under root.
func load(root string) (*manifests, error) {
	m := &manifests{root: root, kusts: map[string]*kustomization{}}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Kustomizations first: they say which files are patches.
	patchFiles := map[string]bool{}
	for _, f := range files {
		if path.Base(f) != "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		k := &kustomization{}
		if err := decodeStrict(data, k); err != nil {
			return nil, fmt.Errorf("%s: %w: %w", f, errDecode, err)
		}
		if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
			return nil, fmt.Errorf("%s: %w: apiVersion %q kind %q, want kustomize.config.k8s.io/v1beta1 Kustomization", f, errDecode, k.APIVersion, k.Kind)
		}
		m.kusts[f] = k
		for _, p := range k.Patches {
			patchFiles[path.Join(path.Dir(f), p.Path)] = true
		}
	}
	var errs []error
	for _, f := range files {
		if m.kusts[f] != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		for i, doc := range docSeparator.Split(string(data), -1) {
			o := object{file: f, doc: i + 1}
			j, err := yaml.YAMLToJSONStrict([]byte(doc))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w: %w", o, errDecode, err))
				continue
			}
			if string(bytes.TrimSpace(j)) == "null" {
				continue // comments only
			}
			var tm metav1.TypeMeta
			if err := json.Unmarshal(j, &tm); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w: %w", o, errDecode, err))
				continue
			}
			o.obj = newObject(tm.APIVersion, tm.Kind)
			if o.obj == nil {
				errs = append(errs, fmt.Errorf("%s: %w: apiVersion %q kind %q is not a kind the checker knows", o, errDecode, tm.APIVersion, tm.Kind))
				continue
			}
			if err := decodeStrict([]byte(doc), o.obj); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w: %s %w", o, errDecode, tm.Kind, err))
				continue
			}
			if patchFiles[f] {
				m.patches = append(m.patches, o)
			} else {
				m.objects = append(m.objects, o)
			}
		}
	}
	return m, errors.Join(errs...)
}

func objectsOf[T any](m *manifests) []*T {
	var out []*T
	for _, o := range m.objects {
		if v, ok := o.obj.(*T); ok {
			out = append(out, v)
		}
	}
	return out
}

// kindName is an object's kind and name, for kustomize's patch targets.
func kindName(obj any) (string, string) {
	switch v := obj.(type) {
	case *appsv1.Deployment:
		return "Deployment", v.Name
	case *corev1.Service:
		return "Service", v.Name
	case *corev1.ConfigMap:
		return "ConfigMap", v.Name
	case *corev1.Secret:
		return "Secret", v.Name
	case *corev1.Namespace:
		return "Namespace", v.Name
	case *policyv1.PodDisruptionBudget:
		return "PodDisruptionBudget", v.Name
	case *networkingv1.NetworkPolicy:
		return "NetworkPolicy", v.Name
	}
	return "", ""
}

// check returns every broken invariant of m. moduleRoot is where the
// bundled agents/<name>/agent.json files are, and scratch a directory for
// the agent folders rebuilt from their ConfigMaps.
func check(m *manifests, moduleRoot, scratch string) []error {
	var errs []error
	errs = append(errs, checkKustomizations(m)...)
	deps := objectsOf[appsv1.Deployment](m)
	svcs := objectsOf[corev1.Service](m)
	pdbs := objectsOf[policyv1.PodDisruptionBudget](m)
	for _, d := range deps {
		errs = append(errs, checkDeployment(m, d, moduleRoot, scratch)...)
		podLabels := labels.Set(d.Spec.Template.Labels)
		nSvc, nPDB := 0, 0
		for _, s := range svcs {
			if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
				nSvc++
			}
		}
		for _, p := range pdbs {
			if sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(podLabels) {
				nPDB++
			}
		}
		if nSvc == 0 {
			errs = append(errs, fmt.Errorf("Deployment %s: %w: no Service selects its pods", d.Name, errService))
		}
		if nPDB != 1 {
			errs = append(errs, fmt.Errorf("Deployment %s: %w: %d PodDisruptionBudgets select its pods, want 1", d.Name, errPDB, nPDB))
		}
	}
	for _, s := range svcs {
		errs = append(errs, checkService(s, deps)...)
	}
	for _, p := range pdbs {
		errs = append(errs, checkPDB(p, deps)...)
	}
	for _, np := range objectsOf[networkingv1.NetworkPolicy](m) {
		errs = append(errs, checkNetworkPolicy(np, deps)...)
	}
	for _, d := range deps {
		errs = append(errs, checkToken(d)...)
	}
	for _, s := range objectsOf[corev1.Secret](m) {
		if len(s.Data)+len(s.StringData) > 0 {
			errs = append(errs, fmt.Errorf("Secret %s: %w: it holds %d values; create Secrets outside the repository", s.Name, errSecret, len(s.Data)+len(s.StringData)))
		}
	}
	return errs
}

func checkKustomizations(m *manifests) []error {
	var errs []error
	for f, k := range m.kusts {
		dir := path.Dir(f)
		for _, r := range k.Resources {
			p := filepath.Join(m.root, filepath.FromSlash(path.Join(dir, r)))
			fi, err := os.Stat(p)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: resource %q: %w: %w", f, r, errKustomization, err))
			case fi.IsDir():
				if _, err := os.Stat(filepath.Join(p, "kustomization.yaml")); err != nil {
					errs = append(errs, fmt.Errorf("%s: resource %q: %w: a directory without kustomization.yaml: %w", f, r, errKustomization, err))
				}
			}
		}
		for _, img := range k.Images {
			if img.Digest == "" && (img.NewTag == "" || img.NewTag == "latest") {
				errs = append(errs, fmt.Errorf("%s: image %q: %w: newTag %q and no digest", f, img.Name, errImage, img.NewTag))
			}
		}
		for _, p := range k.Patches {
			pf := path.Join(dir, p.Path)
			var docs []object
			for _, o := range m.patches {
				if o.file == pf {
					docs = append(docs, o)
				}
			}
			if len(docs) == 0 {
				errs = append(errs, fmt.Errorf("%s: patch %q: %w: no such manifest", f, p.Path, errKustomization))
				continue
			}
			for _, d := range docs {
				kind, name := kindName(d.obj)
				if p.Target != nil && (p.Target.Kind != kind || p.Target.Name != name) {
					errs = append(errs, fmt.Errorf("%s: patch %q: %w: target %s %s, the patch is %s %s", f, p.Path, errKustomization, p.Target.Kind, p.Target.Name, kind, name))
				}
				found := false
				for _, o := range m.objects {
					if k2, n2 := kindName(o.obj); k2 == kind && n2 == name {
						found = true
					}
				}
				if !found {
					errs = append(errs, fmt.Errorf("%s: patch %q: %w: no %s %s to patch", f, p.Path, errKustomization, kind, name))
				}
			}
		}
	}
	return errs
}

// imagePinned reports whether an image reference names a tag other than
// latest, or a digest.
func imagePinned(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return true
	}
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(name, ":")
	return ok && tag != "" && tag != "latest"
}

// flagValue returns the value of --name (or -name) in args, either as
// --name=v or as --name v.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue // the command and its subcommands: agent serve
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// portOf resolves a probe's or Service's port against a container's ports.
func portOf(p intstr.IntOrString, c *corev1.Container) bool {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && p.StrVal == cp.Name) || (p.Type == intstr.Int && p.IntVal == cp.ContainerPort) {
			return true
		}
	}
	return false
}

func checkDeployment(m *manifests, d *appsv1.Deployment, moduleRoot, scratch string) []error {
	var errs []error
	fail := func(sentinel error, format string, args ...any) {
		errs = append(errs, fmt.Errorf("Deployment %s: %w: %s", d.Name, sentinel, fmt.Sprintf(format, args...)))
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	switch {
	case err != nil:
		fail(errSelector, "%v", err)
	case sel.Empty():
		fail(errSelector, "an empty selector")
	case !sel.Matches(labels.Set(d.Spec.Template.Labels)):
		fail(errSelector, "selector %s does not match the pod labels %v", sel, d.Spec.Template.Labels)
	}
	pod := &d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		fail(errSecurity, "the pod's securityContext does not set runAsNonRoot: true")
	}
	volumes := map[string]*corev1.Volume{}
	for i := range pod.Volumes {
		volumes[pod.Volumes[i].Name] = &pod.Volumes[i]
	}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		cfail := func(sentinel error, format string, args ...any) {
			fail(sentinel, "container %s: %s", c.Name, fmt.Sprintf(format, args...))
		}
		if !imagePinned(c.Image) {
			cfail(errImage, "image %q has no tag but latest, and no digest", c.Image)
		}
		for _, pr := range []struct {
			kind, path string
			p          *corev1.Probe
		}{{"livenessProbe", livenessPath, c.LivenessProbe}, {"readinessProbe", readinessPath, c.ReadinessProbe}} {
			switch {
			case pr.p == nil || pr.p.HTTPGet == nil:
				cfail(errProbe, "no %s httpGet", pr.kind)
			case pr.p.HTTPGet.Path != pr.path:
				cfail(errProbe, "%s on %q, want %q", pr.kind, pr.p.HTTPGet.Path, pr.path)
			case !portOf(pr.p.HTTPGet.Port, c):
				cfail(errProbe, "%s on port %s, which is none of the container's ports", pr.kind, pr.p.HTTPGet.Port.String())
			}
		}
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			cfail(errSecurity, "readOnlyRootFilesystem is not true")
		}
		if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
			cfail(errSecurity, "allowPrivilegeEscalation is not false")
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			cfail(errSecurity, "no cpu and memory requests and memory limit")
		}
		for _, e := range c.Env {
			if e.Value != "" && secretName.MatchString(e.Name) {
				cfail(errSecret, "env %s is a literal value; use valueFrom.secretKeyRef", e.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && secretName.MatchString(e.Name) {
				cfail(errSecret, "env %s comes from a ConfigMap; use a Secret", e.Name)
			}
		}

		// What `agent serve` is told: its drain, data directory and folder.
		args := append(slices.Clone(c.Command), c.Args...)
		if !slices.Contains(args, "serve") {
			continue
		}
		grace := defaultDrainGrace
		if v, ok := flagValue(args, "shutdown-grace"); ok {
			if grace, err = time.ParseDuration(v); err != nil {
				cfail(errGrace, "--shutdown-grace %q: %v", v, err)
			}
		}
		if tg := pod.TerminationGracePeriodSeconds; tg == nil {
			cfail(errGrace, "no terminationGracePeriodSeconds for a drain of %v", grace)
		} else if time.Duration(*tg)*time.Second <= grace {
			cfail(errGrace, "terminationGracePeriodSeconds %d is not longer than the drain's %v", *tg, grace)
		}
		mounted := func(dir string) *corev1.Volume {
			for _, vm := range c.VolumeMounts {
				if path.Clean(vm.MountPath) == path.Clean(dir) {
					return volumes[vm.Name]
				}
			}
			return nil
		}
		if dataDir, ok := flagValue(args, "data-dir"); !ok {
			cfail(errSecurity, "no --data-dir: the default is under the read-only root filesystem")
		} else if v := mounted(dataDir); v == nil || v.EmptyDir == nil {
			cfail(errSecurity, "--data-dir %s is not an emptyDir mount", dataDir)
		}
		agentDir, ok := flagValue(args, "agent")
		if !ok {
			cfail(errConfig, "no --agent")
			continue
		}
		v := mounted(agentDir)
		if v == nil || v.ConfigMap == nil {
			cfail(errConfig, "--agent %s is not a ConfigMap mount", agentDir)
			continue
		}
		errs = append(errs, checkAgentFolder(m, d, c, agentDir, v.ConfigMap, moduleRoot, scratch)...)
	}
	return errs
}

// checkAgentFolder rebuilds the agent folder the container mounts from its
// ConfigMap, loads it with the real loaders and the container's
// environment (a Secret's value stands in as a placeholder), and checks it
// against the bundled agent and its siblings against the Services.
func checkAgentFolder(m *manifests, d *appsv1.Deployment, c *corev1.Container, agentDir string, src *corev1.ConfigMapVolumeSource, moduleRoot, scratch string) []error {
	var errs []error
	fail := func(sentinel error, format string, args ...any) {
		errs = append(errs, fmt.Errorf("Deployment %s: container %s: %w: "+format, append([]any{d.Name, c.Name, sentinel}, args...)...))
	}
	var cm *corev1.ConfigMap
	for _, o := range objectsOf[corev1.ConfigMap](m) {
		if o.Name == src.Name {
			cm = o
		}
	}
	if cm == nil {
		fail(errConfig, "ConfigMap %s is not among the manifests", src.Name)
		return errs
	}
	dir := filepath.Join(scratch, d.Name, path.Base(agentDir))
	write := func(key, rel string) {
		data, ok := cm.Data[key]
		if !ok {
			fail(errConfig, "ConfigMap %s has no key %q", cm.Name, key)
			return
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if err == nil {
			err = os.WriteFile(p, []byte(data), 0o644)
		}
		if err != nil {
			fail(errConfig, "%v", err)
		}
	}
	if len(src.Items) == 0 {
		for k := range cm.Data {
			write(k, k)
		}
	}
	for _, it := range src.Items {
		write(it.Key, it.Path)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "(secret " + e.ValueFrom.SecretKeyRef.Name + ")"
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		}
	}
	def, err := agentdef.LoadWith(dir, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		fail(errConfig, "the folder from ConfigMap %s does not load: %w", cm.Name, err)
		return errs
	}
	bundled, err := os.ReadFile(filepath.Join(moduleRoot, "agents", def.Name, agentdef.DefinitionFile))
	if err != nil {
		fail(errConfig, "agent %s is not a bundled agent: %w", def.Name, err)
	} else if cm.Data[agentdef.DefinitionFile] != string(bundled) {
		fail(errConfig, "ConfigMap %s's agent.json differs from agents/%s/agent.json", cm.Name, def.Name)
	}
	for _, s := range def.MCP.Servers {
		if s.URL == "" {
			continue
		}
		errs = append(errs, checkSibling(m, d, s.Name, s.URL, s.ProtocolVersion)...)
	}
	return errs
}

// checkSibling checks one tools/mcp.json server: its URL names a Service
// of the manifests (by its name, in the namespace or fully qualified) on
// one of its ports, the Service selects pods, and a sibling of several
// replicas without session affinity is pinned to the sessionless protocol.
func checkSibling(m *manifests, d *appsv1.Deployment, name, raw, version string) []error {
	fail := func(format string, args ...any) []error {
		return []error{fmt.Errorf("Deployment %s: mcp.json server %q: %w: %s", d.Name, name, errSibling, fmt.Sprintf(format, args...))}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fail("url %q: %v", raw, err)
	}
	host, portStr, err := net.SplitHostPort(u.Host)
	if err != nil {
		return fail("url %q names no port: %v", raw, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fail("url %q: port %q: %v", raw, portStr, err)
	}
	svcName, _, _ := strings.Cut(host, ".")
	var svc *corev1.Service
	for _, s := range objectsOf[corev1.Service](m) {
		if s.Name == svcName {
			svc = s
		}
	}
	if svc == nil {
		return fail("url %q: no Service %s", raw, svcName)
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return int(p.Port) == port }) {
		return fail("url %q: Service %s has no port %d", raw, svcName, port)
	}
	for _, sib := range objectsOf[appsv1.Deployment](m) {
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(sib.Spec.Template.Labels)) {
			continue
		}
		replicas := int32(1)
		if sib.Spec.Replicas != nil {
			replicas = *sib.Spec.Replicas
		}
		if replicas > 1 && svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP && version != pool.Protocol20260728 {
			return fail("Service %s spreads requests over %d replicas of %s: pin protocolVersion %q (sessionless), not %q", svcName, replicas, sib.Name, pool.Protocol20260728, version)
		}
		return nil
	}
	return fail("url %q: Service %s selects no Deployment's pods", raw, svcName)
}

// selected returns the Deployments whose pods sel matches.
func selected(sel labels.Selector, deps []*appsv1.Deployment) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, d := range deps {
		if !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d)
		}
	}
	return out
}

func checkService(s *corev1.Service, deps []*appsv1.Deployment) []error {
	var errs []error
	sel := labels.SelectorFromSet(s.Spec.Selector)
	targets := selected(sel, deps)
	if len(targets) == 0 {
		return []error{fmt.Errorf("Service %s: %w: selector %v selects no Deployment's pods", s.Name, errService, s.Spec.Selector)}
	}
	for _, p := range s.Spec.Ports {
		target := p.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(p.Port) // unset: the port itself
		}
		for _, d := range targets {
			if !slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return portOf(target, &c) }) {
				errs = append(errs, fmt.Errorf("Service %s: port %d: %w: targetPort %s is no container port of Deployment %s", s.Name, p.Port, errService, target.String(), d.Name))
			}
		}
	}
	return errs
}

func checkPDB(p *policyv1.PodDisruptionBudget, deps []*appsv1.Deployment) []error {
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
	if err != nil {
		return []error{fmt.Errorf("PodDisruptionBudget %s: %w: %w", p.Name, errPDB, err)}
	}
	targets := selected(sel, deps)
	if len(targets) == 0 {
		return []error{fmt.Errorf("PodDisruptionBudget %s: %w: selector %s selects no Deployment's pods", p.Name, errPDB, sel)}
	}
	if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.Type != intstr.Int || p.Spec.MinAvailable.IntVal < 1 {
		return []error{fmt.Errorf("PodDisruptionBudget %s: %w: minAvailable %v, want a count of at least 1", p.Name, errPDB, p.Spec.MinAvailable)}
	}
	var errs []error
	for _, d := range targets {
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		// minAvailable equal to the replicas forbids every eviction: a node
		// drain would never finish.
		if p.Spec.MinAvailable.IntVal >= replicas {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: %w: minAvailable %d with %d replicas of %s blocks every drain", p.Name, errPDB, p.Spec.MinAvailable.IntVal, replicas, d.Name))
		}
	}
	return errs
}

func checkNetworkPolicy(np *networkingv1.NetworkPolicy, deps []*appsv1.Deployment) []error {
	var errs []error
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return []error{fmt.Errorf("NetworkPolicy %s: %w: %w", np.Name, errSelector, err)}
	}
	targets := selected(sel, deps)
	if len(targets) == 0 {
		errs = append(errs, fmt.Errorf("NetworkPolicy %s: %w: podSelector %s selects no Deployment's pods", np.Name, errSelector, sel))
	}
	for _, in := range np.Spec.Ingress {
		for _, from := range in.From {
			if from.PodSelector == nil {
				continue
			}
			fs, err := metav1.LabelSelectorAsSelector(from.PodSelector)
			if err != nil || len(selected(fs, deps)) == 0 {
				errs = append(errs, fmt.Errorf("NetworkPolicy %s: %w: an ingress from %v that selects no Deployment's pods", np.Name, errSelector, from.PodSelector.MatchLabels))
			}
		}
		for _, p := range in.Ports {
			for _, d := range targets {
				if p.Port != nil && !slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return portOf(*p.Port, &c) }) {
					errs = append(errs, fmt.Errorf("NetworkPolicy %s: %w: port %s is no container port of Deployment %s", np.Name, errSelector, p.Port.String(), d.Name))
				}
			}
		}
	}
	return errs
}

// verify is the whole checker: load and check the manifests under root.
func verify(t *testing.T, root string) error {
	t.Helper()
	m, err := load(root)
	if err != nil {
		return err
	}
	return errors.Join(check(m, moduleRoot(t), t.TempDir())...)
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not two directories up: %v", err)
	}
	return root
}

// TestManifests checks every manifest under deploy/kubernetes.
func TestManifests(t *testing.T) {
	if err := verify(t, "."); err != nil {
		t.Fatal(err)
	}
	m, err := load(".")
	if err != nil {
		t.Fatal(err)
	}
	// The shape the docs promise: the three bundled agents, two replicas
	// each, and oracle's siblings on the Services (checked above).
	replicas := map[string]int32{}
	for _, d := range objectsOf[appsv1.Deployment](m) {
		replicas[d.Name] = *d.Spec.Replicas
	}
	for _, name := range []string{"oracle", "packrat", "abacus"} {
		if replicas[name] != 2 {
			t.Errorf("Deployment %s: %d replicas, want 2 (%v)", name, replicas[name], replicas)
		}
	}
	if len(m.kusts) != 2 || len(m.patches) != 1 {
		t.Errorf("%d kustomizations and %d patches, want the base and the example overlay, with its one patch", len(m.kusts), len(m.patches))
	}
	t.Logf("%d objects and %d patches in %d kustomizations decoded strictly and checked", len(m.objects), len(m.patches), len(m.kusts))
}

// TestCheckerCatchesBrokenManifests breaks a copy of the manifests one way
// at a time and wants the check for that way to fail: a checker that
// passes everything would pass TestManifests too.
func TestCheckerCatchesBrokenManifests(t *testing.T) {
	const (
		abacus = "base/abacus.yaml"
		oracle = "base/oracle.yaml"
		agents = "base/agents.yaml"
	)
	cases := []struct {
		name, file, old, new string
		want                 error
	}{
		{"agent without a token", abacus, "            - --token-env=SWITCHBOARD_TOKEN\n", "", errToken},
		{"token from a variable no Secret sets", abacus, "--token-env=SWITCHBOARD_TOKEN", "--token-env=ABACUS_TOKEN", errToken},
		{"unknown field", abacus, "  revisionHistoryLimit: 5\n", "  revisionHistoryLimit: 5\n  revisionHistoryLimt: 5\n", errDecode},
		{"duplicate key", abacus, "  revisionHistoryLimit: 5\n", "  revisionHistoryLimit: 5\n  revisionHistoryLimit: 6\n", errDecode},
		{"unknown kustomization field", "base/kustomization.yaml", "resources:\n", "commonLabelz: {}\nresources:\n", errDecode},
		{"liveness on a wrong port", abacus, "              path: /healthz\n              port: mcp\n", "              path: /healthz\n              port: 9090\n", errProbe},
		{"readiness on /healthz", abacus, "              path: /readyz\n", "              path: /healthz\n", errProbe},
		{"no readiness probe", abacus, "          readinessProbe:\n            httpGet:\n              path: /readyz\n              port: mcp\n", "          startupProbe:\n            httpGet:\n              path: /readyz\n              port: mcp\n", errProbe},
		{"grace shorter than the drain", abacus, "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 25", errGrace},
		{"drain longer than the grace", abacus, "--shutdown-grace=25s", "--shutdown-grace=40s", errGrace},
		{"selector off the pod labels", abacus, "  revisionHistoryLimit: 5\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: abacus\n", "  revisionHistoryLimit: 5\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: abacuz\n", errSelector},
		{"service targetPort names no container port", abacus, "targetPort: mcp", "targetPort: http", errService},
		{"PDB selects nothing", abacus, "  minAvailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: abacus\n", "  minAvailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: abacuz\n", errPDB},
		{"PDB blocks drains", abacus, "  minAvailable: 1\n", "  minAvailable: 2\n", errPDB},
		{"literal token", oracle, "            - name: SWITCHBOARD_TOKEN\n              valueFrom:\n                secretKeyRef:\n                  name: switchboard-token\n                  key: token\n", "            - name: SWITCHBOARD_TOKEN\n              value: hunter2\n", errSecret},
		{"a Secret with data", agents, "---\napiVersion: v1\nkind: ConfigMap\n", "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: switchboard-token\nstringData:\n  token: hunter2\n---\napiVersion: v1\nkind: ConfigMap\n", errSecret},
		{"image :latest", abacus, "switchboard:0.1.0", "switchboard:latest", errImage},
		{"image without a tag", abacus, "switchboard:0.1.0", "switchboard", errImage},
		{"overlay tag latest", "overlays/example/kustomization.yaml", "newTag: 0.1.0", "newTag: latest", errImage},
		{"writable root filesystem", abacus, "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", errSecurity},
		{"data dir off the emptyDir", abacus, "--data-dir=/var/lib/switchboard", "--data-dir=/srv/data", errSecurity},
		{"missing resource", "base/kustomization.yaml", "  - abacus.yaml\n", "  - abacus.yaml\n  - studio.yaml\n", errKustomization},
		{"patch of nothing", "overlays/example/abacus-replicas.yaml", "  name: abacus\n", "  name: abacuz\n", errKustomization},
		{"agent.json drifted from the bundled one", agents, "Calculator: evaluates", "Calculator: computes", errConfig},
		{"mcp.json needs a variable the pod lacks", agents, "Bearer ${SWITCHBOARD_TOKEN}", "Bearer ${SWITCHBOARD_ORACLE_TOKEN}", errConfig},
		{"sibling on a port its Service lacks", agents, "http://abacus:8080/mcp", "http://abacus:9090/mcp", errSibling},
		{"sibling on no Service", agents, "http://abacus:8080/mcp", "http://calculator:8080/mcp", errSibling},
		{"sibling of two replicas in the session era", agents, "\"url\": \"${SWITCHBOARD_ABACUS_URL:-http://abacus:8080/mcp}\",\n          \"protocolVersion\": \"2026-07-28\"", "\"url\": \"${SWITCHBOARD_ABACUS_URL:-http://abacus:8080/mcp}\",\n          \"protocolVersion\": \"2025-11-25\"", errSibling},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, ".")
			p := filepath.Join(root, filepath.FromSlash(tc.file))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte(tc.old)) {
				t.Fatalf("%s does not contain %q: the case breaks nothing", tc.file, tc.old)
			}
			if err := os.WriteFile(p, bytes.Replace(data, []byte(tc.old), []byte(tc.new), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			err = verify(t, root)
			if !errors.Is(err, tc.want) {
				t.Fatalf("want an error wrapping %q, got: %v", tc.want, err)
			}
			t.Logf("caught: %v", err)
		})
	}
}

// copyTree copies the YAML files under dir to a new temporary directory.
func copyTree(t *testing.T, dir string) string {
	t.Helper()
	root := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestKustomizeBuild renders each kustomization with the kustomize that
// kubectl embeds (`kubectl kustomize`, offline: no cluster is contacted)
// and checks the rendered objects, which are what `kubectl apply -k`
// would send: the same strict decoding and invariants as the source
// files, and for the overlay that its namespace, image and patch took.
// Without kubectl it is skipped: Debian's kubernetes-client is too old to
// know `patches`, and the source files are checked above either way.
func TestKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skipf("kubectl is not on PATH (%v): the rendered manifests are not checked; TestManifests checks the sources", err)
	}
	for _, dir := range []string{"base", "overlays/example"} {
		t.Run(dir, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(kubectl, "kustomize", filepath.FromSlash(dir))
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, &stderr)
			}
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "rendered.yaml"), out, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := verify(t, root); err != nil {
				t.Fatal(err)
			}
			m, err := load(root)
			if err != nil {
				t.Fatal(err)
			}
			if dir != "overlays/example" {
				return
			}
			for _, o := range m.objects {
				kind, name := kindName(o.obj)
				meta := o.obj.(metav1.Object)
				if kind != "Namespace" && meta.GetNamespace() != "switchboard" {
					t.Errorf("%s %s: namespace %q, want switchboard", kind, name, meta.GetNamespace())
				}
			}
			for _, d := range objectsOf[appsv1.Deployment](m) {
				if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.example.com/switchboard:0.1.0" {
					t.Errorf("Deployment %s: image %q, want the overlay's registry.example.com/switchboard:0.1.0", d.Name, img)
				}
				if want := map[string]int32{"abacus": 3}[d.Name]; want != 0 && *d.Spec.Replicas != want {
					t.Errorf("Deployment %s: %d replicas, want the overlay's %d", d.Name, *d.Spec.Replicas, want)
				}
			}
			t.Logf("kubectl kustomize %s: %d objects, checked", dir, len(m.objects))
		})
	}
}

// checkToken: an agent (app.kubernetes.io/component: agent) listens beyond
// loopback, so it must require a bearer token: `--token-env=VAR` with VAR
// set from a Secret in the same container. A NetworkPolicy alone is not
// enough: it holds only where the network plugin enforces it.
func checkToken(d *appsv1.Deployment) []error {
	if d.Spec.Template.Labels["app.kubernetes.io/component"] != "agent" {
		return nil
	}
	var errs []error
	for _, c := range d.Spec.Template.Spec.Containers {
		env := ""
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			if v, ok := strings.CutPrefix(a, "--token-env="); ok {
				env = v
			}
		}
		if env == "" {
			errs = append(errs, fmt.Errorf("Deployment %s: container %s: %w: no --token-env=VAR in its args", d.Name, c.Name, errToken))
			continue
		}
		fromSecret := false
		for _, e := range c.Env {
			if e.Name == env && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				fromSecret = true
			}
		}
		if !fromSecret {
			errs = append(errs, fmt.Errorf("Deployment %s: container %s: %w: --token-env=%s, and %s is not set from a Secret (valueFrom.secretKeyRef)", d.Name, c.Name, errToken, env, env))
		}
	}
	return errs
}
