// Command dra-go-allocate runs the upstream structured allocator
// (k8s.io/dynamic-resource-allocation/structured, the code the kube-scheduler
// links) offline, on the same input as `kubectl dra allocate`, and prints the
// same report, so that the Python allocator can be checked against it.
//
//	dra-go-allocate -f FILE [-f FILE...] [--claim NS/NAME...] [--node NAME] [--features LIST]
//	dra-go-allocate --batch < cases.jsonl > results.jsonl
//	dra-go-allocate -cel-cost < expressions.jsonl > costs.jsonl   (see celcost.go)
//
// A batch case is one JSON object a line: {"id", "objects", "claims", "node",
// "features"}; each result line is {"id", "exit", "report"} or {"id", "exit": 2,
// "error"}. Exit codes and report shape follow `kubectl dra allocate`: 0 all
// claims allocated, 1 unsatisfiable, 2 an error.
//
// Semantics mirror the kube-scheduler's DynamicResources plugin: the allocated
// state is gathered from the claims that have an allocation (admin-access
// results hold nothing, shared results hold their share and capacity when
// DRAConsumableCapacity is on), DeviceTaintRules are applied by the upstream
// ResourceSlice tracker, and nodes are tried one at a time in name order, the
// first node on which every pending claim fits wins (the offline tool's
// documented node choice).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

const (
	exitAllocated     = 0
	exitUnsatisfiable = 1
	exitError         = 2
)

// gateNames maps the gate names `kubectl dra allocate --features` takes to the
// allocator's feature switches; compat_*.go add those of some releases only.
var gateNames = map[string]func(*structured.Features, bool){
	"DRAPrioritizedList":      func(f *structured.Features, on bool) { f.PrioritizedList = on },
	"DRAAdminAccess":          func(f *structured.Features, on bool) { f.AdminAccess = on },
	"DRADeviceTaints":         func(f *structured.Features, on bool) { f.DeviceTaints = on },
	"DRAPartitionableDevices": func(f *structured.Features, on bool) { f.PartitionableDevices = on },
	"DRAConsumableCapacity":   func(f *structured.Features, on bool) { f.ConsumableCapacity = on },
	"DRADeviceBindingConditions": func(f *structured.Features, on bool) {
		bindingConditions = on
		setBinding(f)
	},
	"DRAResourceClaimDeviceStatus": func(f *structured.Features, on bool) {
		claimDeviceStatus = on
		setBinding(f)
	},
	"DRADeviceTaintRules": func(_ *structured.Features, on bool) { taintRules = on },
}

// The allocator only knows the combined binding switch; DeviceTaintRules is a
// tracker option, not an allocator feature.
var bindingConditions, claimDeviceStatus, taintRules bool

// defaultGates are the gates on when no --features is given: the ones
// `kubectl dra allocate` enables by default.
var defaultGates = []string{
	"DRAPrioritizedList", "DRAAdminAccess", "DRADeviceTaints", "DRAPartitionableDevices",
	"DRAConsumableCapacity", "DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus",
	"DRAFractionalCapacityRange", // on by default in 1.37 (beta); a no-op in the 1.36 build
}

func parseFeatures(spec *string) (structured.Features, error) {
	var f structured.Features
	// DeviceTaintRules apply whatever --features says, as in `kubectl dra allocate`
	// (its DeviceTaintRules input is the switch); DRADeviceTaintRules=false turns them off.
	bindingConditions, claimDeviceStatus, taintRules = false, false, true
	items := defaultGates
	if spec != nil {
		items = strings.Split(*spec, ",")
	}
	for _, raw := range items {
		item := strings.TrimSpace(raw)
		if item == "" || item == "none" {
			continue
		}
		if item == "all" {
			for _, set := range gateNames {
				set(&f, true)
			}
			for _, set := range gateNames { // binding needs both flags set first
				set(&f, true)
			}
			continue
		}
		name, value, hasValue := strings.Cut(item, "=")
		set, ok := gateNames[strings.TrimSpace(name)]
		if !ok {
			return f, fmt.Errorf("unknown feature %q", name)
		}
		on := !hasValue || strings.TrimSpace(value) == "true"
		set(&f, on)
	}
	return f, nil
}

type input struct {
	classes []*resourceapi.DeviceClass
	slices  []*resourceapi.ResourceSlice
	claims  []*resourceapi.ResourceClaim
	nodes   []*v1.Node
	rules   []*deviceTaintRule
	pods    []*v1.Pod
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func decodeInto(raw json.RawMessage, out any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	return dec.Decode(out)
}

// addObject files one object by kind; objects of other kinds and API versions
// are ignored, as `kubectl dra allocate` ignores them.
func (in *input) addObject(raw json.RawMessage) error {
	var tm typeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return err
	}
	if tm.Kind == "List" {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return err
		}
		for _, item := range list.Items {
			if err := in.addObject(item); err != nil {
				return err
			}
		}
		return nil
	}
	switch {
	case tm.APIVersion == "resource.k8s.io/v1" && tm.Kind == "DeviceClass":
		obj := &resourceapi.DeviceClass{}
		if err := decodeInto(raw, obj); err != nil {
			return fmt.Errorf("DeviceClass: %w", err)
		}
		in.classes = append(in.classes, obj)
	case tm.APIVersion == "resource.k8s.io/v1" && tm.Kind == "ResourceSlice":
		obj := &resourceapi.ResourceSlice{}
		if err := decodeInto(raw, obj); err != nil {
			return fmt.Errorf("ResourceSlice: %w", err)
		}
		if err := asStored(obj); err != nil {
			return fmt.Errorf("ResourceSlice: %w", err)
		}
		in.slices = append(in.slices, obj)
	case tm.APIVersion == "resource.k8s.io/v1" && tm.Kind == "ResourceClaim":
		obj := &resourceapi.ResourceClaim{}
		if err := decodeInto(raw, obj); err != nil {
			return fmt.Errorf("ResourceClaim: %w", err)
		}
		if obj.Namespace == "" {
			obj.Namespace = "default"
		}
		defaultClaim(obj)
		if err := asStored(obj); err != nil {
			return fmt.Errorf("ResourceClaim: %w", err)
		}
		if obj.UID == "" {
			obj.UID = types.UID("uid-" + obj.Namespace + "-" + obj.Name)
		}
		in.claims = append(in.claims, obj)
	case strings.HasPrefix(tm.APIVersion, "resource.k8s.io/") && tm.Kind == "DeviceTaintRule":
		// Every served version has the same spec shape; the scheduler reads them as v1.
		obj := &deviceTaintRule{}
		if err := decodeInto(raw, obj); err != nil {
			return fmt.Errorf("DeviceTaintRule: %w", err)
		}
		in.rules = append(in.rules, obj)
	case tm.APIVersion == "v1" && tm.Kind == "Pod":
		obj := &v1.Pod{}
		if err := decodeInto(raw, obj); err != nil {
			return fmt.Errorf("Pod: %w", err)
		}
		if obj.Namespace == "" {
			obj.Namespace = "default"
		}
		in.pods = append(in.pods, obj)
	case tm.APIVersion == "v1" && tm.Kind == "Node":
		obj := &v1.Node{}
		if err := decodeInto(raw, obj); err != nil {
			return fmt.Errorf("Node: %w", err)
		}
		in.nodes = append(in.nodes, obj)
	}
	return nil
}

// asStored re-reads an object from its own JSON encoding, as the scheduler reads it back
// from the API server: quantities in their canonical form ("1.5Gi" is stored as "1536Mi",
// "0.5" as "500m"), which matters where upstream compares Quantity structs with ==.
func asStored[T any](obj *T) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var stored T
	if err := json.Unmarshal(data, &stored); err != nil {
		return err
	}
	*obj = stored
	return nil
}

// defaultClaim applies the API server's defaults to a claim's requests (the
// scheduler only ever sees stored, defaulted objects; input files may omit them).
func defaultClaim(claim *resourceapi.ResourceClaim) {
	defaultTolerations := func(tolerations []resourceapi.DeviceToleration) {
		for i := range tolerations {
			if tolerations[i].Operator == "" {
				tolerations[i].Operator = resourceapi.DeviceTolerationOpEqual
			}
		}
	}
	for i := range claim.Spec.Devices.Requests {
		req := &claim.Spec.Devices.Requests[i]
		if exact := req.Exactly; exact != nil {
			if exact.AllocationMode == "" {
				exact.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if exact.AllocationMode == resourceapi.DeviceAllocationModeExactCount && exact.Count == 0 {
				exact.Count = 1
			}
			defaultTolerations(exact.Tolerations)
		}
		for j := range req.FirstAvailable {
			sub := &req.FirstAvailable[j]
			if sub.AllocationMode == "" {
				sub.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if sub.AllocationMode == resourceapi.DeviceAllocationModeExactCount && sub.Count == 0 {
				sub.Count = 1
			}
			defaultTolerations(sub.Tolerations)
		}
	}
}

type classLister struct {
	byName map[string]*resourceapi.DeviceClass
}

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l.byName))
	for _, c := range l.byName {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l.byName[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("deviceclass %q not found", name)
}

// allocatedState gathers what the claims with an allocation hold, like the
// scheduler's claim tracker (GatherAllocatedState / ListAllAllocatedDevices).
func allocatedState(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(result.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if consumable && result.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, result.ShareID))
				if result.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state
}

// patchedSlices applies DeviceTaintRules to the slices with the scheduler's own
// ResourceSlice tracker, fed from a fake clientset.
func patchedSlices(ctx context.Context, in *input, consumable bool) ([]*resourceapi.ResourceSlice, error) {
	if !taintRules || len(in.rules) == 0 {
		return in.slices, nil
	}
	var objs []runtime.Object
	for i, s := range in.slices {
		copied := s.DeepCopy()
		if copied.Name == "" {
			copied.Name = fmt.Sprintf("slice-%d", i)
		}
		objs = append(objs, copied)
	}
	for _, c := range in.classes {
		objs = append(objs, c.DeepCopy()) // 1.36's tracker resolves classes of rules
	}
	for i, r := range in.rules {
		copied := r.DeepCopy()
		if copied.Name == "" {
			copied.Name = fmt.Sprintf("rule-%d", i)
		}
		objs = append(objs, copied)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(ctx)
	// Informers stop only once their context is cancelled, so cancel before Shutdown.
	defer factory.Shutdown()
	defer cancel()
	t, err := tracker.StartTracker(ctx, trackerOptions(factory, consumable))
	if err != nil {
		return nil, err
	}
	defer t.Stop()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	deadline := time.Now().Add(10 * time.Second)
	for !t.HasSynced() {
		if time.Now().After(deadline) {
			return nil, errors.New("ResourceSlice tracker did not sync")
		}
		time.Sleep(time.Millisecond)
	}
	slices, err := t.ListPatchedResourceSlices()
	if err != nil {
		return nil, err
	}
	// The tracker lists in map order; the allocator sorts what it needs itself,
	// but keep the input order for reproducibility.
	pos := map[string]int{}
	for i, o := range objs[:len(in.slices)] {
		pos[o.(*resourceapi.ResourceSlice).Name] = i
	}
	sort.Slice(slices, func(a, b int) bool { return pos[slices[a].Name] < pos[slices[b].Name] })
	return slices, nil
}

func claimKey(c *resourceapi.ResourceClaim) string { return c.Namespace + "/" + c.Name }

// nodesToTry: every Node object plus a label-less node for each slice nodeName
// without one, in name order, like `kubectl dra allocate`.
func nodesToTry(in *input, only string) []*v1.Node {
	byName := map[string]*v1.Node{}
	for _, n := range in.nodes {
		byName[n.Name] = n
	}
	for _, s := range in.slices {
		if name := ptr.Deref(s.Spec.NodeName, ""); name != "" {
			if _, ok := byName[name]; !ok {
				byName[name] = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
			}
		}
	}
	if only != "" {
		if n, ok := byName[only]; ok {
			return []*v1.Node{n}
		}
		return []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: only}}}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]*v1.Node, 0, len(names))
	for _, name := range names {
		out = append(out, byName[name])
	}
	return out
}

type outcome struct {
	exit   int
	report map[string]any
	err    error
}

func allocatedNode(a *resourceapi.AllocationResult) string {
	if a.NodeSelector == nil {
		return ""
	}
	for _, term := range a.NodeSelector.NodeSelectorTerms {
		for _, req := range term.MatchFields {
			if req.Key == "metadata.name" && req.Operator == v1.NodeSelectorOpIn && len(req.Values) == 1 {
				return req.Values[0]
			}
		}
	}
	return ""
}

func allocate(ctx context.Context, in *input, claimKeys []string, only string, features structured.Features) outcome {
	byKey := map[string]*resourceapi.ResourceClaim{}
	for _, c := range in.claims {
		byKey[claimKey(c)] = c
	}
	var wanted []*resourceapi.ResourceClaim
	if len(claimKeys) == 0 {
		for _, c := range in.claims {
			if c.Status.Allocation == nil {
				wanted = append(wanted, c)
			}
		}
	} else {
		for _, key := range claimKeys {
			if !strings.Contains(key, "/") {
				key = "default/" + key
			}
			c, ok := byKey[key]
			if !ok {
				return outcome{exit: exitError, err: fmt.Errorf("claim %s not found in the input", key)}
			}
			wanted = append(wanted, c)
		}
	}
	claimsOut := map[string]any{}
	var done, pending []*resourceapi.ResourceClaim
	for _, c := range wanted {
		if c.Status.Allocation != nil {
			done = append(done, c)
			claimsOut[claimKey(c)] = map[string]any{"allocated": true, "node": allocatedNode(c.Status.Allocation), "allocation": c.Status.Allocation}
		} else {
			pending = append(pending, c)
		}
	}
	if len(pending) == 0 {
		return outcome{exit: exitAllocated, report: map[string]any{"claims": claimsOut}}
	}
	classes := classLister{byName: map[string]*resourceapi.DeviceClass{}}
	for _, c := range in.classes {
		classes.byName[c.Name] = c
	}
	slices, err := patchedSlices(ctx, in, features.ConsumableCapacity)
	if err != nil {
		return outcome{exit: exitError, err: err}
	}
	allocator, err := structured.NewAllocator(ctx, features, allocatedState(in.claims, features.ConsumableCapacity), classes, slices, cel.NewCache(100, celFeatures(features)))
	if err != nil {
		return outcome{exit: exitError, err: err}
	}
	unsatisfiable := func() outcome {
		for _, c := range pending {
			claimsOut[claimKey(c)] = map[string]any{"allocated": false}
		}
		return outcome{exit: exitUnsatisfiable, report: map[string]any{"claims": claimsOut}}
	}
	pod := podOfClaims(in.pods, wanted)
	scored := features.PrioritizedList && hasSubRequests(pending)
	var best struct {
		score   int64
		node    *v1.Node
		results []resourceapi.AllocationResult
	}
	for _, node := range nodesToTry(in, only) {
		if only == "" && pod != nil && !podFits(pod, node) {
			continue
		}
		fits := true
		for _, c := range done {
			if sel := c.Status.Allocation.NodeSelector; sel != nil {
				ok, err := nodeaffinity.NewLazyErrorNodeSelector(sel).Match(node)
				if err != nil || !ok {
					fits = false
				}
			}
		}
		if !fits {
			continue
		}
		allocCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		results, err := allocator.Allocate(allocCtx, node, pending)
		cancel()
		switch {
		case errors.Is(err, structured.ErrFailedAllocationOnNode):
			continue
		case err != nil:
			return outcome{exit: exitError, err: fmt.Errorf("node %s: %w", node.Name, err)}
		case results == nil:
			continue
		}
		if scored {
			// Like the scheduler's Score: the node where earlier subrequests fit wins;
			// among equal scores the first by name (the scheduler picks one at random).
			if score := subRequestScore(pending, results); best.node == nil || score > best.score {
				best.score, best.node, best.results = score, node, results
			}
			continue
		}
		return placed(claimsOut, pending, node, results)
	}
	if best.node != nil {
		return placed(claimsOut, pending, best.node, best.results)
	}
	return unsatisfiable()
}

func placed(claimsOut map[string]any, pending []*resourceapi.ResourceClaim, node *v1.Node, results []resourceapi.AllocationResult) outcome {
	for i, c := range pending {
		result := results[i]
		claimsOut[claimKey(c)] = map[string]any{"allocated": true, "node": node.Name, "allocation": &result}
	}
	return outcome{exit: exitAllocated, report: map[string]any{"claims": claimsOut}}
}

func hasSubRequests(claims []*resourceapi.ResourceClaim) bool {
	for _, c := range claims {
		for _, r := range c.Spec.Devices.Requests {
			if len(r.FirstAvailable) > 0 {
				return true
			}
		}
	}
	return false
}

// subRequestScore restates the DynamicResources plugin's computeScore (unexported in
// k8s.io/kubernetes): a request's subrequest i adds FirstAvailableDeviceRequestMaxSize-i.
func subRequestScore(claims []*resourceapi.ResourceClaim, results []resourceapi.AllocationResult) int64 {
	var score int64
	for i, claim := range claims {
		picked := sets.New[string]()
		for _, res := range results[i].Devices.Results {
			if strings.Contains(res.Request, "/") {
				picked.Insert(res.Request)
			}
		}
		for _, req := range claim.Spec.Devices.Requests {
			for j, sub := range req.FirstAvailable {
				if picked.Has(req.Name + "/" + sub.Name) {
					score += int64(resourceapi.FirstAvailableDeviceRequestMaxSize - j)
				}
			}
		}
	}
	return score
}

// podOfClaims is the input pod referencing one of the claims by name, if any.
func podOfClaims(pods []*v1.Pod, claims []*resourceapi.ResourceClaim) *v1.Pod {
	wanted := sets.New[string]()
	for _, c := range claims {
		wanted.Insert(claimKey(c))
	}
	for _, pod := range pods {
		for _, ref := range pod.Spec.ResourceClaims {
			if ref.ResourceClaimName != nil && wanted.Has(pod.Namespace+"/"+*ref.ResourceClaimName) {
				return pod
			}
		}
	}
	return nil
}

// podFits applies the scheduler's NodeName, NodeAffinity (nodeSelector and required
// affinity) and TaintToleration filters, with the helpers those plugins use.
func podFits(pod *v1.Pod, node *v1.Node) bool {
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return false
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

func readFiles(paths []string) (*input, error) {
	in := &input{}
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			ext := filepath.Ext(path)
			if !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, path := range files {
		fh, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(fh, 4096)
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				_ = fh.Close()
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			if err := in.addObject(raw); err != nil {
				_ = fh.Close()
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		_ = fh.Close()
	}
	return in, nil
}

type batchCase struct {
	ID       string            `json:"id"`
	Objects  []json.RawMessage `json:"objects"`
	Claims   []string          `json:"claims"`
	Node     string            `json:"node"`
	Features *string           `json:"features"`
}

func runBatch(ctx context.Context, r io.Reader, w io.Writer) error {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 256<<20)
	enc := json.NewEncoder(w)
	for scanner.Scan() {
		line := scanner.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var c batchCase
		if err := json.Unmarshal(line, &c); err != nil {
			return fmt.Errorf("batch input: %w", err)
		}
		result := map[string]any{"id": c.ID}
		in := &input{}
		var out outcome
		features, err := parseFeatures(c.Features)
		if err != nil {
			out = outcome{exit: exitError, err: err}
		} else {
			for _, raw := range c.Objects {
				if err = in.addObject(raw); err != nil {
					break
				}
			}
			if err != nil {
				out = outcome{exit: exitError, err: err}
			} else {
				out = allocateRecovering(ctx, in, c.Claims, c.Node, features)
			}
		}
		result["exit"] = out.exit
		if out.err != nil {
			result["error"] = out.err.Error()
		} else {
			result["report"] = out.report
		}
		if err := enc.Encode(result); err != nil {
			return err
		}
	}
	return scanner.Err()
}

// runSequence allocates the pending claims of one case one after the other, each
// alone (one pod each) on the first node that fits, the way a scheduler fills a
// cluster: each placed claim holds its devices for the next. It prints the wall
// time and every claim's node, for a side-by-side benchmark with `kubectl dra`.
func runSequence(ctx context.Context, r io.Reader, w io.Writer) error {
	var c batchCase
	if err := json.NewDecoder(r).Decode(&c); err != nil {
		return fmt.Errorf("sequence input: %w", err)
	}
	features, err := parseFeatures(c.Features)
	if err != nil {
		return err
	}
	in := &input{}
	for _, raw := range c.Objects {
		if err := in.addObject(raw); err != nil {
			return err
		}
	}
	byKey := map[string]*resourceapi.ResourceClaim{}
	for _, claim := range in.claims {
		byKey[claimKey(claim)] = claim
	}
	placed := make([]string, 0, len(c.Claims))
	start := time.Now()
	for _, key := range c.Claims {
		claim, ok := byKey[key]
		if !ok {
			return fmt.Errorf("claim %s not found in the input", key)
		}
		out := allocate(ctx, in, []string{key}, c.Node, features)
		if out.err != nil {
			return out.err
		}
		entry := out.report["claims"].(map[string]any)[key].(map[string]any)
		if entry["allocated"] != true {
			placed = append(placed, "")
			continue
		}
		claim.Status.Allocation = entry["allocation"].(*resourceapi.AllocationResult)
		placed = append(placed, entry["node"].(string))
	}
	elapsed := time.Since(start)
	return json.NewEncoder(w).Encode(map[string]any{"seconds": elapsed.Seconds(), "nodes": placed})
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	var files, claims multiFlag
	flag.Var(&files, "f", "manifest file or directory (repeatable)")
	flag.Var(&claims, "claim", "NS/NAME of a claim to allocate (repeatable; default: every unallocated one)")
	node := flag.String("node", "", "allocate on this node only")
	featureSpec := flag.String("features", "", "DRA feature gates on (GATE[,GATE=false...], all, none); default: those of kubectl dra allocate")
	batch := flag.Bool("batch", false, "read cases as JSON lines on stdin, write results as JSON lines")
	sequence := flag.Bool("sequence", false, "read one case on stdin and allocate its claims one at a time (benchmark)")
	celCost := flag.Bool("cel-cost", false, "read CEL selectors as JSON lines on stdin, write upstream's compile-time cost estimate of each")
	flag.Parse()
	ctx := context.Background()
	if *celCost {
		if err := runCelCost(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "dra-go-allocate: %v\n", err)
			os.Exit(exitError)
		}
		return
	}
	if *sequence {
		if err := runSequence(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "dra-go-allocate: %v\n", err)
			os.Exit(exitError)
		}
		return
	}
	if *batch {
		if err := runBatch(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "dra-go-allocate: %v\n", err)
			os.Exit(exitError)
		}
		return
	}
	var spec *string
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "features" {
			spec = featureSpec
		}
	})
	features, err := parseFeatures(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dra-go-allocate: %v\n", err)
		os.Exit(exitError)
	}
	in, err := readFiles(files)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dra-go-allocate: %v\n", err)
		os.Exit(exitError)
	}
	out := allocate(ctx, in, claims, *node, features)
	if out.err != nil {
		fmt.Fprintf(os.Stderr, "dra-go-allocate: %v\n", out.err)
		os.Exit(out.exit)
	}
	data, _ := json.MarshalIndent(out.report, "", "  ")
	fmt.Println(string(data))
	os.Exit(out.exit)
}
