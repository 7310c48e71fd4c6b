// Package trace reads PyTorch profiler (Kineto) traces in Chrome-trace JSON
// as a stream, and Nsight Systems SQLite exports, and reduces them to a
// Workload: the CUDA runtime and driver
// calls, GPU kernels, copies and memsets, synchronization records and
// ProfilerStep marks the performance model needs. Nothing else is kept, and
// no raw JSON is held: memory grows with the operations kept, not with the
// size of the file.
//
// # Input framing
//
// The input is UTF-8 JSON, optionally gzip-compressed. Gzip is recognized by
// its two magic bytes at offset 0, 1f 8b (RFC 1952); anything else is read
// as JSON. The JSON is either an object with a "traceEvents" array (Kineto
// writes this; other members such as "schemaVersion", "deviceProperties" and
// "distributedInfo" are validated and skipped, "schemaVersion" is kept) or a
// bare array of events (the Chrome trace "JSON array format").
//
// A worked example: this 124-byte trace holds one kernel.
//
//	00000000: 7b22 7472 6163 6545 7665 6e74 7322 3a5b  {"traceEvents":[
//	00000010: 7b22 7068 223a 2258 222c 2263 6174 223a  {"ph":"X","cat":
//	00000020: 226b 6572 6e65 6c22 2c22 6e61 6d65 223a  "kernel","name":
//	00000030: 226b 222c 2270 6964 223a 302c 2274 6964  "k","pid":0,"tid
//	00000040: 223a 372c 2274 7322 3a31 302e 352c 2264  ":7,"ts":10.5,"d
//	00000050: 7572 223a 322c 2261 7267 7322 3a7b 2273  ur":2,"args":{"s
//	00000060: 7472 6561 6d22 3a37 2c22 636f 7272 656c  tream":7,"correl
//	00000070: 6174 696f 6e22 3a33 7d7d 5d7d            ation":3}}]}
//
// Bytes 0x00-0x0f open the object and its traceEvents array; the event at
// 0x10 is a complete event ("ph":"X") of category kernel on pid 0 (the GPU)
// and tid 7, starting at ts 10.5 us (kept as 10500 ns) for dur 2 us
// (2000 ns); args.stream (7) places it on stream 7 and args.correlation (3)
// links it to the cudaLaunchKernel call with the same correlation. The same
// trace gzip-compressed starts 1f 8b 08 (deflate) and is decoded the same.
//
// # Events
//
// Each element of traceEvents is an object; its members may come in any
// order and unknown ones are skipped. The decoder reads:
//
//	ph    "X" complete event (kept), "s"/"f"/"t" flow events (used to recover
//	      missing correlations), anything else counted and dropped
//	cat   cuda_runtime, cuda_driver (old: Runtime, Driver): a Runtime op;
//	      kernel (old: Kernel), gpu_memcpy (Memcpy), gpu_memset (Memset);
//	      cuda_sync: a Sync record; ac2g, async_cpu_to_gpu (old: async): flows
//	name  API or kernel name; "ProfilerStep#N" marks step N (the first such
//	      CPU-side event; the GPU-side gpu_user_annotation copy is ignored);
//	      memcpy names carry the direction and host memory, as in
//	      "Memcpy HtoD (Pageable -> Device)"
//	pid, tid   numbers or strings ("stream 7" and numeric strings read as
//	      numbers; other strings get a stable negative identifier)
//	ts, dur    microseconds, integer or decimal, kept as integer nanoseconds
//	      (exact to three decimals; a fourth rounds)
//	id    flow identifier (the correlation ID for ac2g flows)
//	args.correlation, args.stream, args.device, args.bytes
//	args.cuda_sync_kind ("Stream Sync", "Context Sync", "Event Sync",
//	      "Stream Wait Event"), args.wait_on_stream,
//	      args.wait_on_cuda_event_record_corr_id
//
// Stream -1 and 4294967295 mean "no stream" (a context-wide sync). A GPU
// event without args.stream takes its stream from a numeric tid, and without
// args.device its device from pid. When an operation lacks
// args.correlation, the flow finishing ('f') at its pid, tid and ts, or for
// a runtime call the flow starting ('s') there, supplies it.
//
// # Errors
//
// The decoder validates all of the JSON, including values it skips. Any
// malformed or truncated input yields a *SyntaxError whose Offset counts
// bytes of JSON (after decompression) up to where decoding stopped;
// truncation wraps io.ErrUnexpectedEOF. A value of the wrong type for a
// member the decoder reads (a string ts, an object pid) is not an error: the
// member counts as absent, and an event without ts is not kept.
//
// # Nsight Systems exports
//
// DecodeFile and Decode also read the SQLite database that `nsys export
// --type sqlite` writes, recognized by its 16-byte magic "SQLite format 3"
// and a zero byte. DecodeNsys reads it with a small built-in reader of the
// SQLite file format (no SQL engine, no cgo): the 100-byte header, table
// b-trees, records and overflow pages. From testdata/model/nsys-small.sqlite:
//
//	00000000: 5351 4c69 7465 2066 6f72 6d61 7420 3300  SQLite format 3.
//	00000010: 0200 0101 0040 2020 0000 0009 0000 0075  .....@  .......u
//	...
//	00000030: 0000 0000 0000 0000 0000 0001 0000 0000  ................
//	...
//	00000060: 002e 6301 0500 0000 0401 ec00 0000 000e  ..c.............
//
// Offset 16 holds the page size, big-endian (0x0200: 512 bytes; 1 means
// 65536); offset 20 the bytes reserved at the end of each page (0); offset
// 28 the database size in pages (0x75: 117); offset 56 the text encoding
// (1: UTF-8, the only one read). Page 1 holds the schema table, whose
// b-tree page header follows the file header at offset 100: type 0x05 (an
// interior table page; 0x0d is a leaf), first freeblock 0, 4 cells (0x0004),
// cell content from offset 0x01ec, 0 fragmented bytes, and, for interior
// pages only, the right-most child page (0x0000000e: page 14). A cell
// pointer array of 2-byte page offsets follows. Leaf cells are a varint
// payload size, a varint rowid and the record (a header of varint serial
// types, then the values), with a 4-byte overflow page number when the
// payload does not fit; interior cells are a 4-byte child page and a
// varint key. Varints are 1 to 9 bytes, 7 bits per byte, high bit set to
// go on, all 8 bits of a ninth byte.
//
// The tables read, by column name, are CUPTI_ACTIVITY_KIND_RUNTIME, _KERNEL,
// _MEMCPY (copyKind, srcKind, dstKind as in CUPTI), _MEMSET,
// _SYNCHRONIZATION (syncType), NVTX_EVENTS (ProfilerStep#N ranges) and
// StringIds; times there are already nanoseconds.
//
// # Speed and memory
//
// The scanner is hand-written rather than encoding/json's Decoder, which
// frames only 0.56 to 0.83 million events per second here even with a no-op
// Unmarshaler. It keeps a 64 KiB window of input and bounded scratch
// buffers (strings past 4 KiB are validated but truncated), allocates
// nothing per event that is not kept, and interns names.
package trace
