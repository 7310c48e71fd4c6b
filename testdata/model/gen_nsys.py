#!/usr/bin/env python3
"""Writes nsys-small.sqlite: a small database with the tables and columns of
an Nsight Systems SQLite export (nsys export --type sqlite), for the tests of
model/trace. Small pages (512 bytes) give multi-level b-trees and overflow
pages; the kernel table gains a column by ALTER TABLE after some rows, as
exports of different versions differ. Run from this directory."""
import os
import sqlite3

PATH = "nsys-small.sqlite"
if os.path.exists(PATH):
    os.remove(PATH)
db = sqlite3.connect(PATH)
db.execute("PRAGMA page_size = 512")
db.executescript("""
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL, eventClass INT NOT NULL,
  globalTid INT, correlationId INT, nameId INT NOT NULL REFERENCES StringIds(id), returnValue INT NOT NULL, callchainId INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, contextId INT NOT NULL,
  streamId INT NOT NULL, correlationId INT, globalPid INT, demangledName INT NOT NULL REFERENCES StringIds(id),
  registersPerThread INT NOT NULL, gridX INT NOT NULL, gridY INT NOT NULL, gridZ INT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, contextId INT NOT NULL,
  streamId INT NOT NULL, correlationId INT, globalPid INT, bytes INT NOT NULL, copyKind INT NOT NULL, deprecatedSrcId INT,
  srcKind INT NOT NULL, dstKind INT NOT NULL, srcDeviceId INT, srcContextId INT, dstDeviceId INT, dstContextId INT,
  migrationCause INT, graphNodeId INT, virtualAddress INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, contextId INT NOT NULL,
  streamId INT NOT NULL, correlationId INT, globalPid INT, value INT NOT NULL, bytes INT NOT NULL, graphNodeId INT, memKind INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL,
  contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT, globalPid INT, syncType INT NOT NULL, eventId INT NOT NULL);
CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT, category INT, color INT,
  text TEXT, globalTid INT, endGlobalTid INT, textId INT REFERENCES StringIds(id), domainId INT, uint64Value INT);
""")
strings = {1: "cudaLaunchKernel", 2: "cudaStreamSynchronize", 3: "cudaMemcpyAsync",
           4: "void gemm_kernel<" + "k" * 680 + ">(float*)", 5: "ProfilerStep#3", 6: "gemm"}
for i in range(100, 400):
    strings[i] = "filler string number %d" % i
db.executemany("INSERT INTO StringIds VALUES (?, ?)", sorted(strings.items()))
TID = (1234 << 24) | 5678
PID = 1234 << 24
for i in range(600):
    t = 10_000 * i
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,?,?,1,0,0)", (t, t + 5_000, TID, 3 * i + 1))
    values = "?,?,0,1,7,?,?,4,32,8,1,1" + (",6" if i >= 10 else "")
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (" + values + ")", (t + 6_000, t + 8_000, 3 * i + 1, PID))
    if i == 9:
        db.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN shortName INT")
    if i % 100 == 0:
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,?,?,3,0,0)", (t + 5_100, t + 5_600, TID, 3 * i + 2))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,0,1,7,?,?,4096,1,0,1,3,0,1,0,1,0,0,0)",
                   (t + 8_100, t + 8_500, 3 * i + 2, PID))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,1,?,?,2,0,0)", (t + 5_700, t + 8_700, TID, 3 * i + 3))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?,?,0,1,7,?,?,3,0)", (t + 5_800, t + 8_600, 3 * i + 3, PID))
db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,0,1,7,?,?,0,512,0,3)", (9_000, 9_100, 9_999, PID))
db.execute("INSERT INTO NVTX_EVENTS VALUES (0, 3000000, 59, 0, 0, 0, NULL, ?, ?, 5, 0, 0)", (TID, TID))
db.execute("INSERT INTO NVTX_EVENTS VALUES (3000000, 6000000, 59, 0, 0, 0, 'ProfilerStep#4', ?, ?, NULL, 0, 0)", (TID, TID))
db.execute("INSERT INTO NVTX_EVENTS VALUES (100, 200, 59, 0, 0, 0, 'forward', ?, ?, NULL, 0, 0)", (TID, TID))
db.commit()
db.execute("VACUUM")
db.close()
