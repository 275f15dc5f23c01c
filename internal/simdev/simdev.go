// Package simdev simulates one GPU's memory as PyTorch processes see it, so that the
// executor, the simulator speech engine and their tests can be checked against the
// behaviour that causes real out-of-memory failures without a GPU.
//
// Each simulated process has resident memory (the model after load) and a caching
// allocator: allocations made during a request raise Allocated; Reserved, the cache
// pool PyTorch keeps, ratchets up to the largest peak seen and only falls on
// EmptyCache, exactly as NVML's per-process figure does for a real IndexTTS-2 host
// (see docs/indextts.md). An allocation that would push the device past its total
// (every process's resident + reserved memory, plus memory held by foreign processes)
// fails with ErrOutOfMemory.
//
// All methods are safe for concurrent use.
package simdev

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrOutOfMemory is returned when an allocation does not fit on the device, the
// simulated counterpart of "CUDA out of memory".
var ErrOutOfMemory = errors.New("simdev: CUDA out of memory")

// ErrExited is returned by a process that has exited (or was killed).
var ErrExited = errors.New("simdev: process has exited")

// Device is a simulated GPU. The zero value is not usable; call New.
type Device struct {
	mu       sync.Mutex
	total    int64
	foreign  int64
	procs    map[int]*Process
	nextPID  int
	peakUsed int64
	ooms     int64
}

// New returns a device with total bytes of memory and no processes.
func New(total int64) *Device {
	return &Device{total: total, procs: map[int]*Process{}, nextPID: 1000}
}

// Total returns the device's memory size in bytes.
func (d *Device) Total() int64 { return d.total }

// SetForeign sets the memory held by processes that are not ours (another user's
// job, a desktop session). It may exceed what is free: the simulation only refuses
// our own allocations.
func (d *Device) SetForeign(bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.foreign = bytes
	d.notePeakLocked()
}

// Foreign returns the memory held by foreign processes.
func (d *Device) Foreign() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.foreign
}

// Used returns what NVML would report as used: foreign memory plus every process's
// resident and reserved memory.
func (d *Device) Used() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.usedLocked()
}

// Free returns Total minus Used, never below zero.
func (d *Device) Free() int64 {
	return max(d.Total()-d.Used(), 0)
}

// PeakUsed returns the highest Used seen since New or the last ResetPeak.
func (d *Device) PeakUsed() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peakUsed
}

// ResetPeak sets PeakUsed to the current Used.
func (d *Device) ResetPeak() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.peakUsed = d.usedLocked()
}

// OOMs returns how many allocations (model loads included) have failed.
func (d *Device) OOMs() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ooms
}

func (d *Device) usedLocked() int64 {
	u := d.foreign
	for _, p := range d.procs {
		u += p.resident + p.reserved
	}
	return u
}

func (d *Device) notePeakLocked() {
	if u := d.usedLocked(); u > d.peakUsed {
		d.peakUsed = u
	}
}

// growLocked checks that growth more bytes fit on the device, counting an OOM if not.
func (d *Device) growLocked(growth int64) error {
	if growth <= 0 {
		return nil
	}
	if used := d.usedLocked(); used+growth > d.total {
		d.ooms++
		return fmt.Errorf("tried to allocate %d bytes with %d of %d in use: %w",
			growth, used, d.total, ErrOutOfMemory)
	}
	return nil
}

// Spawn starts a process and loads its model: resident bytes stay allocated until the
// process exits. It fails with ErrOutOfMemory when the model does not fit.
func (d *Device) Spawn(resident int64) (*Process, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.growLocked(resident); err != nil {
		return nil, fmt.Errorf("loading model: %w", err)
	}
	d.nextPID++
	p := &Process{d: d, pid: d.nextPID, resident: resident}
	d.procs[p.pid] = p
	d.notePeakLocked()
	return p, nil
}

// Active returns how many processes have memory allocated for a request in flight
// (a stand-in for the GPU being busy).
func (d *Device) Active() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, p := range d.procs {
		if p.allocated > 0 {
			n++
		}
	}
	return n
}

// ProcessInfo is one process as NVML lists it.
type ProcessInfo struct {
	PID int
	// UsedBytes is resident + reserved: what nvidia-smi shows for the process.
	UsedBytes int64
}

// Processes lists the live processes by PID.
func (d *Device) Processes() []ProcessInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]ProcessInfo, 0, len(d.procs))
	for _, p := range d.procs {
		out = append(out, ProcessInfo{PID: p.pid, UsedBytes: p.resident + p.reserved})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// Reading is an atomic view of the device, as one NVML sample would give it.
type Reading struct {
	Total, Used, Free int64
	Processes         []ProcessInfo
}

// Read returns the device's memory and processes at one instant, so that a sample
// built from it is consistent (foreign = Used − our processes).
func (d *Device) Read() Reading {
	d.mu.Lock()
	defer d.mu.Unlock()
	used := d.usedLocked()
	r := Reading{Total: d.total, Used: used, Free: max(d.total-used, 0)}
	for _, p := range d.procs {
		r.Processes = append(r.Processes, ProcessInfo{PID: p.pid, UsedBytes: p.resident + p.reserved})
	}
	sort.Slice(r.Processes, func(i, j int) bool { return r.Processes[i].PID < r.Processes[j].PID })
	return r
}

// Process is one simulated model host on a Device.
type Process struct {
	d   *Device
	pid int
	// guarded by d.mu
	resident  int64
	allocated int64
	reserved  int64
	peakAlloc int64
	exited    bool
}

// Stats is a process's memory, in bytes.
type Stats struct {
	Resident int64 // model memory after load
	// Allocated is the memory in use by the current request(s), on top of Resident.
	Allocated int64
	// Reserved is the caching allocator's pool (>= Allocated): it ratchets up to the
	// largest Allocated seen and only drops on EmptyCache.
	Reserved int64
	// PeakAllocated is the largest Allocated since the last ResetPeak
	// (torch.cuda.max_memory_allocated minus the model).
	PeakAllocated int64
	// Used is Resident + Reserved, what NVML reports for the process.
	Used   int64
	Exited bool
}

// PID returns the process's simulated id.
func (p *Process) PID() int { return p.pid }

// Stats returns the process's memory counters.
func (p *Process) Stats() Stats {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	return Stats{
		Resident: p.resident, Allocated: p.allocated, Reserved: p.reserved,
		PeakAllocated: p.peakAlloc, Used: p.resident + p.reserved, Exited: p.exited,
	}
}

// Alloc allocates n bytes. The cache pool is used first; only growth beyond Reserved
// needs free device memory, and if it is not there the allocation fails with
// ErrOutOfMemory and nothing changes.
func (p *Process) Alloc(n int64) error {
	if n < 0 {
		return fmt.Errorf("simdev: negative allocation %d", n)
	}
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if p.exited {
		return ErrExited
	}
	want := p.allocated + n
	if err := p.d.growLocked(want - p.reserved); err != nil {
		return err
	}
	p.allocated = want
	p.reserved = max(p.reserved, want)
	p.peakAlloc = max(p.peakAlloc, want)
	p.d.notePeakLocked()
	return nil
}

// Release returns n bytes to the process's cache pool; Reserved does not change.
func (p *Process) Release(n int64) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.allocated = max(p.allocated-n, 0)
}

// EmptyCache gives the unused part of the cache pool back to the device
// (torch.cuda.empty_cache).
func (p *Process) EmptyCache() {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.reserved = p.allocated
}

// ResetPeak sets PeakAllocated to the current Allocated.
func (p *Process) ResetPeak() {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.peakAlloc = p.allocated
}

// Infer simulates one request whose extra peak is peak bytes: it allocates the peak,
// calls during (if not nil) while the memory is held, and releases it. The cache pool
// keeps the peak afterwards. An OOM leaves the process as it was, as a caught
// torch.cuda.OutOfMemoryError would.
func (p *Process) Infer(peak int64, during func()) error {
	if err := p.Alloc(peak); err != nil {
		return err
	}
	if during != nil {
		during()
	}
	p.Release(peak)
	return nil
}

// Exit ends the process (normally, or killed by the OS) and frees all its memory.
func (p *Process) Exit() {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if p.exited {
		return
	}
	p.exited = true
	p.allocated, p.reserved, p.resident = 0, 0, 0
	delete(p.d.procs, p.pid)
}
