package gpu_test

import (
	"context"
	"fmt"

	"dubstudio/gpu"
)

// An executor on one 24 GB card with two model hosts: a line is admitted, runs, and
// reports its outcome; the host keeps the request's peak in its cache.
func ExampleExecutor() {
	ctx := context.Background()
	exec := gpu.NewExecutor(gpu.ExecutorConfig{})
	profile := gpu.DefaultProfile() // concurrency 2, 15% reserve
	_ = exec.AddGPU(gpu.GPUConfig{UUID: "GPU-0", TotalBytes: 24 << 30, Profile: profile})
	for i, id := range []string{"host-a", "host-b"} {
		_ = exec.AddHost(ctx, "GPU-0", gpu.HostSpec{ID: id, Order: i})
		_ = exec.HostReady("GPU-0", id, gpu.ReadyHost{PID: 100 + i})
	}

	lease, err := exec.Acquire(ctx, gpu.Request{ID: "line 7", AudioSeconds: 12})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s on %s, seat %d, lane %s, predicted %d MiB\n",
		lease.Request.ID, lease.HostID, lease.Seat(), lease.Lane, lease.PredictedBytes>>20)
	_ = lease.Done(gpu.Outcome{PeakBytes: 480 << 20, CachedAfter: 480 << 20})

	s := exec.Snapshot()[0]
	fmt.Printf("budget %d MiB, committed %d MiB\n", s.BudgetBytes>>20, s.CommittedBytes>>20)
	// Output:
	// line 7 on host-a, seat 0, lane normal, predicted 501 MiB
	// budget 20889 MiB, committed 10720 MiB
}

// SplitText cuts a line that would be too long to generate in one request.
func ExampleSplitText() {
	text := "This is the first sentence. Here is a second one! And a third?"
	parts, err := gpu.SplitText(text, 10, gpu.ProportionalEstimate(text, 18))
	fmt.Println(len(parts), err)
	for _, p := range parts {
		fmt.Println(p)
	}
	// Output:
	// 2 <nil>
	// This is the first sentence.
	// Here is a second one! And a third?
}
