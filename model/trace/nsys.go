package trace

import (
	"fmt"
	"io"
	"strings"
)

// Nsight Systems exports (nsys export --type sqlite) hold CUPTI activity in
// one table per kind, times in nanoseconds, names in StringIds:
//
//	CUPTI_ACTIVITY_KIND_RUNTIME          start, end, globalTid, correlationId, nameId
//	CUPTI_ACTIVITY_KIND_KERNEL           start, end, deviceId, streamId, correlationId, globalPid, demangledName, shortName
//	CUPTI_ACTIVITY_KIND_MEMCPY           ..., bytes, copyKind, srcKind, dstKind
//	CUPTI_ACTIVITY_KIND_MEMSET           ..., bytes
//	CUPTI_ACTIVITY_KIND_SYNCHRONIZATION  ..., syncType
//	NVTX_EVENTS                          start, end, globalTid, text or textId (ProfilerStep#N ranges)
//
// Columns are found by name from each table's CREATE TABLE statement, so
// added or reordered columns across Nsight versions do not matter.
const (
	nsysRuntime = "CUPTI_ACTIVITY_KIND_RUNTIME"
	nsysKernel  = "CUPTI_ACTIVITY_KIND_KERNEL"
	nsysMemcpy  = "CUPTI_ACTIVITY_KIND_MEMCPY"
	nsysMemset  = "CUPTI_ACTIVITY_KIND_MEMSET"
	nsysSync    = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
	nsysNVTX    = "NVTX_EVENTS"
)

// DecodeNsys reads an Nsight Systems SQLite export of size bytes. It needs
// random access (an SQLite file is a tree of pages), so unlike Decode it
// takes an io.ReaderAt. Malformed files give a *SyntaxError with the file
// offset of the bad page or cell.
func DecodeNsys(r io.ReaderAt, size int64) (*Workload, error) {
	db, err := openSQLite(r, size)
	if err != nil {
		return nil, err
	}
	tabs, err := db.tables()
	if err != nil {
		return nil, err
	}
	if _, ok := tabs[nsysRuntime]; !ok {
		if _, ok := tabs[nsysKernel]; !ok {
			return nil, fmt.Errorf("%w: SQLite file without %s or %s tables (not an Nsight Systems export with CUDA traced?)", ErrNoEvents, nsysRuntime, nsysKernel)
		}
	}
	w := &Workload{SchemaVersion: -1, Bytes: size}
	names := map[int64]string{}
	if t, ok := tabs["StringIds"]; ok {
		id, val := t.col("id"), t.col("value")
		err := db.scanTable(t.root, func(rowid int64, row []sqliteValue) error {
			w.Events++
			k, ok := t.int(rowid, row, id)
			if v := t.get(rowid, row, val); ok && v.kind == 's' {
				names[k] = string(v.s)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	intern := map[string]string{}
	str := func(s string) string {
		if v, ok := intern[s]; ok {
			return v
		}
		intern[s] = s
		return s
	}
	blank := Op{Device: NoID, Stream: NoID, Corr: NoID, PID: NoID, TID: NoID, WaitStream: NoID, WaitEventCorr: NoID}
	scan := func(table string, fn func(t sqliteTable, rowid int64, row []sqliteValue)) error {
		t, ok := tabs[table]
		if !ok {
			return nil
		}
		return db.scanTable(t.root, func(rowid int64, row []sqliteValue) error {
			w.Events++
			fn(t, rowid, row)
			return nil
		})
	}
	// times reads start and end; ok is false for rows without both.
	times := func(t sqliteTable, rowid int64, row []sqliteValue) (start, dur int64, ok bool) {
		s, ok1 := t.int(rowid, row, t.col("start"))
		e, ok2 := t.int(rowid, row, t.col("end"))
		if !ok1 || !ok2 {
			return 0, 0, false
		}
		return s, max(0, e-s), true
	}
	gpu := func(t sqliteTable, rowid int64, row []sqliteValue, kind Kind) (Op, bool) {
		op := blank
		var ok bool
		if op.Start, op.Dur, ok = times(t, rowid, row); !ok {
			return op, false
		}
		op.Kind = kind
		op.Device = t.intOr(rowid, row, "deviceId", NoID)
		op.Stream = t.intOr(rowid, row, "streamId", NoID)
		op.Corr = t.intOr(rowid, row, "correlationId", NoID)
		op.Bytes = t.intOr(rowid, row, "bytes", 0)
		op.PID = (t.intOr(rowid, row, "globalPid", 0) >> 24) & 0xffffff
		op.TID = op.Stream
		return op, true
	}
	err = scan(nsysRuntime, func(t sqliteTable, rowid int64, row []sqliteValue) {
		op := blank
		var ok bool
		if op.Start, op.Dur, ok = times(t, rowid, row); !ok {
			return
		}
		op.Kind = Runtime
		op.Name = str(names[t.intOr(rowid, row, "nameId", -1)])
		gt := t.intOr(rowid, row, "globalTid", 0)
		op.PID, op.TID = (gt>>24)&0xffffff, gt
		op.Corr = t.intOr(rowid, row, "correlationId", NoID)
		w.Ops = append(w.Ops, op)
	})
	if err == nil {
		err = scan(nsysKernel, func(t sqliteTable, rowid int64, row []sqliteValue) {
			if op, ok := gpu(t, rowid, row, Kernel); ok {
				name, found := names[t.intOr(rowid, row, "demangledName", -1)]
				if !found {
					name = names[t.intOr(rowid, row, "shortName", -1)]
				}
				op.Name = str(name)
				w.Ops = append(w.Ops, op)
			}
		})
	}
	if err == nil {
		err = scan(nsysMemcpy, func(t sqliteTable, rowid int64, row []sqliteValue) {
			if op, ok := gpu(t, rowid, row, Memcpy); ok {
				op.Name = str(memcpyName(t.intOr(rowid, row, "copyKind", 0), t.intOr(rowid, row, "srcKind", 0), t.intOr(rowid, row, "dstKind", 0)))
				op.Copy, op.Pageable = ParseCopy(op.Name)
				w.Ops = append(w.Ops, op)
			}
		})
	}
	if err == nil {
		err = scan(nsysMemset, func(t sqliteTable, rowid int64, row []sqliteValue) {
			if op, ok := gpu(t, rowid, row, Memset); ok {
				op.Name = "Memset"
				w.Ops = append(w.Ops, op)
			}
		})
	}
	if err == nil {
		err = scan(nsysSync, func(t sqliteTable, rowid int64, row []sqliteValue) {
			if op, ok := gpu(t, rowid, row, Sync); ok {
				// CUpti_ActivitySynchronizationType.
				switch t.intOr(rowid, row, "syncType", 0) {
				case 1:
					op.SyncKind = SyncEvent
				case 2:
					op.SyncKind = SyncStreamWaitEvent
				case 3:
					op.SyncKind = SyncStream
				case 4:
					op.SyncKind = SyncContext
				}
				op.Stream = normStream(op.Stream)
				op.Name = str(op.SyncKind.String() + " sync")
				w.Ops = append(w.Ops, op)
			}
		})
	}
	if err == nil {
		seen := map[int64]bool{}
		err = scan(nsysNVTX, func(t sqliteTable, rowid int64, row []sqliteValue) {
			text := ""
			if v := t.get(rowid, row, t.col("text")); v.kind == 's' {
				text = string(v.s)
			} else {
				text = names[t.intOr(rowid, row, "textId", -1)]
			}
			rest, isStep := strings.CutPrefix(text, "ProfilerStep#")
			if !isStep {
				return
			}
			start, dur, ok := times(t, rowid, row)
			if !ok {
				return
			}
			var num int64
			if _, err := fmt.Sscan(rest, &num); err != nil {
				num = int64(len(w.Steps))
			}
			if seen[num] {
				return
			}
			seen[num] = true
			gt := t.intOr(rowid, row, "globalTid", 0)
			w.Steps = append(w.Steps, Step{Num: num, Name: str(text), Start: start, Dur: dur, PID: (gt >> 24) & 0xffffff, TID: gt})
		})
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// memcpyName names a copy as Kineto does, from CUpti_ActivityMemcpyKind and
// the CUpti_ActivityMemoryKind of each side.
func memcpyName(copyKind, src, dst int64) string {
	dirs := map[int64]string{1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
	mem := func(k int64) string {
		switch k {
		case 1:
			return "Pageable"
		case 2:
			return "Pinned"
		case 3, 6:
			return "Device"
		case 4:
			return "Array"
		case 5, 7:
			return "Managed"
		}
		return "Unknown"
	}
	dir, ok := dirs[copyKind]
	if !ok {
		dir = "Unknown"
	}
	return fmt.Sprintf("Memcpy %s (%s -> %s)", dir, mem(src), mem(dst))
}

// col returns the index of the named column, or -1.
func (t sqliteTable) col(name string) int {
	for i, c := range t.columns {
		if c == name {
			return i
		}
	}
	return -1
}

// get returns column i of a row (the rowid for an INTEGER PRIMARY KEY
// column; NULL for a column the record lacks).
func (t sqliteTable) get(rowid int64, row []sqliteValue, i int) sqliteValue {
	if i < 0 {
		return sqliteValue{kind: 'n'}
	}
	if i == t.rowidAs {
		return sqliteValue{kind: 'i', i: rowid}
	}
	if i >= len(row) {
		return sqliteValue{kind: 'n'}
	}
	return row[i]
}

func (t sqliteTable) int(rowid int64, row []sqliteValue, i int) (int64, bool) {
	return t.get(rowid, row, i).int()
}

func (t sqliteTable) intOr(rowid int64, row []sqliteValue, name string, def int64) int64 {
	if v, ok := t.int(rowid, row, t.col(name)); ok {
		return v
	}
	return def
}
