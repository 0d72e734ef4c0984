package main

import (
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// migDevice is a MIG device handle: one compute instance of one GPU instance. The mock has
// no MIG device objects; NVML hands out one per compute instance.
type migDevice struct {
	gpu *server.Device
	gi  *server.GpuInstance
	ci  *server.ComputeInstance
}

// eventSet is an NVML event set: the devices registered on it and their event masks.
type eventSet struct {
	masks map[*server.Device]uint64
}

// handles maps the integers C sees to the Go objects behind them, and back, so one object
// always gets the same handle (NVML's handles are stable pointers too).
var handles = struct {
	sync.Mutex
	next     uintptr
	objects  map[uintptr]any
	byObject map[any]uintptr
}{next: 0x1000, objects: map[uintptr]any{}, byObject: map[any]uintptr{}}

// handleOf returns the handle of obj (a pointer or a comparable value), making one if new.
func handleOf(obj any) uintptr {
	handles.Lock()
	defer handles.Unlock()
	if h, ok := handles.byObject[obj]; ok {
		return h
	}
	handles.next += 0x10
	h := handles.next
	handles.objects[h] = obj
	handles.byObject[obj] = h
	return h
}

// release forgets a handle (a freed event set); later calls with it fail as invalid.
func release(h uintptr) {
	handles.Lock()
	defer handles.Unlock()
	if obj, ok := handles.objects[h]; ok {
		delete(handles.byObject, obj)
		delete(handles.objects, h)
	}
}

func lookup(h uintptr) any {
	handles.Lock()
	defer handles.Unlock()
	return handles.objects[h]
}

func gpuOf(h uintptr) *server.Device {
	d, _ := lookup(h).(*server.Device)
	return d
}

func migOf(h uintptr) *migDevice {
	m, _ := lookup(h).(migDevice)
	if m.gpu == nil {
		return nil
	}
	return &m
}

func giOf(h uintptr) *server.GpuInstance {
	gi, _ := lookup(h).(*server.GpuInstance)
	return gi
}

func ciOf(h uintptr) *server.ComputeInstance {
	ci, _ := lookup(h).(*server.ComputeInstance)
	return ci
}

func eventSetOf(h uintptr) *eventSet {
	s, _ := lookup(h).(*eventSet)
	return s
}
