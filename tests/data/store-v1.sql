-- A store written by kernellab's schema 1 (commit 511d4e3, before PRAGMA user_version),
-- by tests/data/make_store_v1.py: two variants, two runs, one log of each kind.
BEGIN TRANSACTION;
CREATE TABLE builds (
    key TEXT PRIMARY KEY, variant_id INTEGER REFERENCES variants(id), record TEXT, created REAL);
INSERT INTO "builds" VALUES('k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1',1,'{"wall_s": 400.0, "image_bytes": 2368512}',1.7954183365239071846e+09);
INSERT INTO "builds" VALUES('k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2',2,'{"wall_s": 30.0, "image_bytes": 2360000}',1.7954183365279312134e+09);
CREATE TABLE logs (
    id INTEGER PRIMARY KEY, run_id INTEGER, build_key TEXT, kind TEXT, text TEXT);
INSERT INTO "logs" VALUES(1,1,NULL,'initramfs','initramfs-0123456789abcdef.cpio');
INSERT INTO "logs" VALUES(2,1,NULL,'options','icount initramfs-0123456789abcdef.cpio KL_ONLY=syscall.null noapictimer');
INSERT INTO "logs" VALUES(3,1,NULL,'clocksource','tsc');
INSERT INTO "logs" VALUES(4,1,NULL,'console','[host  0.100000] [    0.000000] Linux version 6.1.192 (kernellab@kernellab)
[host  4.000000] @KL seq=0 t=hello v=1 agent=kernellab-agent mode=pid1 #1c147158
[host  4.100000] @KL seq=1 t=meta key=clocksource value=tsc #cc5fef0a
');
INSERT INTO "logs" VALUES(5,2,NULL,'initramfs','initramfs-0123456789abcdef.cpio');
INSERT INTO "logs" VALUES(6,2,NULL,'options','icount initramfs-0123456789abcdef.cpio KL_ONLY=syscall.null noapictimer');
INSERT INTO "logs" VALUES(7,2,NULL,'clocksource','tsc');
INSERT INTO "logs" VALUES(8,2,NULL,'not-available','ipc.unix_rtt: socket(AF_UNIX): Address family not supported');
INSERT INTO "logs" VALUES(9,2,NULL,'rejected-records','checksum mismatch: ''@KL seq=5 t=sample''');
INSERT INTO "logs" VALUES(10,2,NULL,'console','[host  0.100000] [    0.000000] Linux version 6.1.192 (kernellab@kernellab)
[host  4.000000] @KL seq=0 t=hello v=1 agent=kernellab-agent mode=pid1 #1c147158
[host  4.100000] @KL seq=1 t=meta key=clocksource value=tsc #cc5fef0a
');
CREATE TABLE runs (
    id INTEGER PRIMARY KEY, variant_id INTEGER REFERENCES variants(id), build_key TEXT,
    target TEXT, mode TEXT, host TEXT, status TEXT, reason TEXT, started REAL, ended REAL,
    command TEXT);
INSERT INTO "runs" VALUES(1,1,'k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1','qemu','icount','vm','ok','',1.79541833653476619716e+09,1.79541833656788206103e+09,'["qemu-system-x86_64", "-kernel", "bzImage"]');
INSERT INTO "runs" VALUES(2,2,'k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2','qemu','icount','vm','panic','Kernel panic - not syncing: x',1795418336.57189,1795418336.61653,'["qemu-system-x86_64", "-kernel", "bzImage"]');
CREATE TABLE samples (
    id INTEGER PRIMARY KEY, run_id INTEGER REFERENCES runs(id), metric TEXT, unit TEXT,
    rep INTEGER, iters INTEGER, value REAL);
INSERT INTO "samples" VALUES(1,1,'syscall.null','ns',0,4096,202.1);
INSERT INTO "samples" VALUES(2,1,'syscall.null','ns',1,4096,202.1);
INSERT INTO "samples" VALUES(3,1,'syscall.null','ns',2,4096,202.2);
INSERT INTO "samples" VALUES(4,1,'boot.agent_ready.printk','s',0,1,0.311);
INSERT INTO "samples" VALUES(5,2,'syscall.null','ns',0,4096,202.1);
INSERT INTO "samples" VALUES(6,2,'syscall.null','ns',1,4096,202.1);
INSERT INTO "samples" VALUES(7,2,'syscall.null','ns',2,4096,202.2);
INSERT INTO "samples" VALUES(8,2,'boot.agent_ready.printk','s',0,1,0.311);
CREATE TABLE sources (
    id TEXT PRIMARY KEY, spec TEXT, kind TEXT, version TEXT, content_hash TEXT, tree TEXT);
INSERT INTO "sources" VALUES('6.1.192-4d415b3d3648','debian:6.1','debian','6.1.192','4d415b3d3648aa','/cache/sources/linux-source-6.1');
CREATE TABLE variants (
    id INTEGER PRIMARY KEY, name TEXT, source_id TEXT REFERENCES sources(id), arch TEXT,
    base TEXT, spec TEXT, config_hash TEXT, dropped TEXT, created REAL,
    UNIQUE (name, source_id, arch, config_hash));
INSERT INTO "variants" VALUES(1,'lab-minimal','6.1.192-4d415b3d3648','x86_64','lab-minimal','{"name": "lab-minimal", "base": "lab-minimal", "fragments": [], "options": [], "source": "debian:6.1", "arch": "x86_64"}','c0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ffee','[]',1.79541833651606750491e+09);
INSERT INTO "variants" VALUES(2,'nounix','6.1.192-4d415b3d3648','x86_64','lab-minimal','{"name": "nounix", "base": "lab-minimal", "fragments": [], "options": ["CONFIG_UNIX=n"], "source": "debian:6.1", "arch": "x86_64"}','beefbeefbeefbeefbeefbeefbeefbeefbeefbeefbeefbeefbeefbeefbeefbeef','[{"option": "CONFIG_E1000", "asked": "y", "got": "n", "origin": "inline"}]',1.79541833652120685579e+09);
CREATE INDEX samples_run ON samples(run_id, metric);
COMMIT;
