package model

import "strings"

// baseName strips the version and per-thread-stream suffixes CUDA adds to
// API names (cudaMemcpy_v2, cudaLaunchKernel_ptsz, cuMemAlloc_v2).
func baseName(name string) string {
	for {
		trimmed := name
		for _, suf := range []string{"_v2", "_v3", "_v4", "_ptsz", "_ptds", "_spt"} {
			trimmed = strings.TrimSuffix(trimmed, suf)
		}
		if trimmed == name {
			return name
		}
		name = trimmed
	}
}

// BlockingWait says what a runtime or driver call of this name blocks the
// CPU for, NoWait for calls that return without waiting for the GPU.
// Queries (cudaEventQuery, cudaStreamQuery) do not block; the builder
// treats the last query of a polling loop (a run of queries) as a wait.
func BlockingWait(name string) WaitKind {
	switch baseName(name) {
	case "cudaStreamSynchronize", "cuStreamSynchronize", "hipStreamSynchronize":
		return WaitStream
	case "cudaDeviceSynchronize", "cudaThreadSynchronize", "cuCtxSynchronize", "hipDeviceSynchronize":
		return WaitDevice
	case "cudaEventSynchronize", "cuEventSynchronize", "hipEventSynchronize":
		return WaitEvent
	case "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol",
		"cudaMemcpyPeer", "cudaMemset", "cudaMemset2D", "cudaMemset3D",
		"cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemcpy2D", "cuMemcpy3D",
		"cuMemsetD8", "cuMemsetD16", "cuMemsetD32", "hipMemcpy", "hipMemcpyWithStream", "hipMemset":
		return WaitCopy
	}
	return NoWait
}

// isQuery reports calls that ask whether GPU work is done without waiting.
func isQuery(name string) bool {
	switch baseName(name) {
	case "cudaEventQuery", "cudaStreamQuery", "cuEventQuery", "cuStreamQuery", "hipEventQuery", "hipStreamQuery":
		return true
	}
	return false
}

// isCopyCall reports calls that launch copies or memsets; when one of them
// returns only after its copy ended (pageable memory), it blocked on it.
func isCopyCall(name string) bool {
	return strings.Contains(name, "Memcpy") || strings.Contains(name, "Memset")
}

// MMIOReads is the number of MMIO reads of GPU registers a call of this
// name makes, each a CPU stall of one round trip behind the fabric. Launches,
// copies and synchronizations touch only host memory and posted doorbell
// writes; the calls that read GPU registers are the ones that go to the
// kernel driver to change GPU memory mappings or channels, which confirm
// the change (an MMU invalidate or a channel update) by reading it back.
func MMIOReads(name string) int {
	switch baseName(name) {
	case "cudaMalloc", "cudaFree", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost",
		"cudaHostRegister", "cudaHostUnregister", "cudaMallocManaged", "cudaMallocPitch",
		"cudaMemGetInfo", "cudaStreamCreate", "cudaStreamCreateWithFlags",
		"cudaStreamCreateWithPriority", "cudaStreamDestroy",
		"cuMemAlloc", "cuMemFree", "cuMemAllocHost", "cuMemFreeHost", "cuMemHostAlloc",
		"cuMemHostRegister", "cuMemHostUnregister", "cuMemGetInfo", "cuStreamCreate",
		"cuStreamCreateWithPriority", "cuStreamDestroy", "cuMemMap", "cuMemUnmap",
		"hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree":
		return 1
	}
	return 0
}
