package rendezvous

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"
)

// FuzzServerFirstMessage sends arbitrary bytes as the first bytes of a
// connection to a server in secret mode. Whatever they are, the server reads
// at most MaxHandshakeBytes before the connection authenticates, the
// connection ends (the fuzzer cannot know the secret), nothing is stored,
// and a client with the secret is still served.
func FuzzServerFirstMessage(f *testing.F) {
	f.Add(appendRequest(nil, &request{op: qValidate, u32: authMagic, nonce: make([]byte, authNonceLen)}))
	f.Add(append(appendRequest(nil, &request{op: qValidate, u32: validationMagic}),
		appendRequest(nil, &request{op: qPing, u32: 1})...))
	f.Add(appendRequest(nil, &request{op: qSet, key: "/k", value: []byte("v")}))
	f.Add(append(append([]byte{byte(qSet)}, u64(1)...), append([]byte{'k'}, u64(8<<20)...)...))
	f.Add(append(append(append([]byte{3}, u64(6)...), "/init/"...), u64(1)...)) // torch 1.13's ADD
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	srv := Serve(cl, &ServerOptions{Secret: "fuzz-secret", HandshakeTimeout: 2 * time.Second})
	defer srv.Close()
	good, err := Dial(context.Background(), srv.Addr().String(), &DialOptions{Secret: "fuzz-secret", Timeout: 10 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	defer good.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		// A local address of its own per connection (all of 127/8 is
		// loopback): the server's TIME_WAITs do not use up the ports.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, byte(1+rand.IntN(254)), byte(rand.IntN(256)), byte(1+rand.IntN(254)))}}
		nc, err := d.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Skip("dial:", err) // out of ports or descriptors: not the server's fault
		}
		defer nc.Close()
		nc.Write(data)
		nc.(*net.TCPConn).CloseWrite()
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		reply, err := io.ReadAll(io.LimitReader(nc, 1<<10))
		if err != nil && !closedByPeer(err) {
			t.Fatalf("connection not ended by the server: %v", err)
		}
		if len(reply) > 8+authNonceLen+8 { // our challenge, then "refused"
			t.Fatalf("server answered %d bytes to an unauthenticated client", len(reply))
		}
		cl.mu.Lock()
		last := cl.conns[len(cl.conns)-1]
		cl.mu.Unlock()
		if n := last.n.Load(); n > MaxHandshakeBytes {
			t.Fatalf("server read %d bytes before authentication (limit %d)", n, MaxHandshakeBytes)
		}
		if n, _ := srv.t.numKeys(); n != 0 {
			t.Fatalf("an unauthenticated client stored %d keys", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := good.Ping(ctx); err != nil {
			t.Fatalf("the authenticated client: %v", err)
		}
	})
}

// FuzzFromEnv gives FromMap contradicting and out-of-range launcher values.
// It never panics or hangs; it returns an *EnvError or a job whose fields
// agree with each other.
func FuzzFromEnv(f *testing.F) {
	f.Add(uint8(0), "0", "2", "0", "2", "0", "1", "127.0.0.1", "29500", "")
	f.Add(uint8(1), "0", "9223372036854775807", "", "", "5", "", "h", "99999", "c[0-9223372036854775807]")
	f.Add(uint8(2), "3", "4", "1", "2", "1", "2", "300.1.1.1", "x", "")
	f.Add(uint8(3), "1", "2", "0", "1", "1", "2", "", "", "gpu[1-2]-ib[0-10000000]")
	f.Add(uint8(0), "0", "1", "", "", "5", "", "", "", ":")
	f.Fuzz(func(t *testing.T, kind uint8, rank, size, lrank, lsize, node, nodes, addr, port, extra string) {
		env := map[string]string{}
		set := func(k, v string) {
			if v != "" {
				env[k] = v
			}
		}
		switch kind % 4 {
		case 0: // nccl4go
			set(EnvRank, rank)
			set(EnvWorldSize, size)
			set(EnvLocalRank, lrank)
			set(EnvLocalWorldSize, lsize)
			set(EnvNodeRank, node)
			set(EnvNumNodes, nodes)
			set(EnvMasterAddr, addr)
			set(EnvMasterPort, port)
			set(EnvStoreAddr, extra)
		case 1: // Slurm
			set("SLURM_PROCID", rank)
			set("SLURM_STEP_ID", "0")
			set("SLURM_NTASKS", size)
			set("SLURM_LOCALID", lrank)
			set("SLURM_STEP_TASKS_PER_NODE", lsize)
			set("SLURM_NODEID", node)
			set("SLURM_NNODES", nodes)
			set("MASTER_ADDR", addr)
			set("MASTER_PORT", port)
			set("SLURM_STEP_NODELIST", extra)
		case 2: // torchrun
			set("RANK", rank)
			set("WORLD_SIZE", size)
			set("LOCAL_RANK", lrank)
			set("LOCAL_WORLD_SIZE", lsize)
			set("GROUP_RANK", node)
			set("GROUP_WORLD_SIZE", nodes)
			set("MASTER_ADDR", addr)
			set("MASTER_PORT", port)
			set("TORCHELASTIC_RUN_ID", extra)
		case 3: // Open MPI with nccl4go overrides
			set("OMPI_COMM_WORLD_RANK", rank)
			set("OMPI_COMM_WORLD_SIZE", size)
			set("OMPI_COMM_WORLD_LOCAL_RANK", lrank)
			set("OMPI_COMM_WORLD_LOCAL_SIZE", lsize)
			set(EnvNodeRank, node)
			set(EnvNumNodes, nodes)
			set("MASTER_ADDR", addr)
			set("MASTER_PORT", port)
			set("SLURM_JOB_NODELIST", extra)
		}
		done := make(chan struct{})
		var j *Job
		var err error
		go func() {
			defer close(done)
			j, err = FromMap(env)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("FromMap(%v) did not return", env)
		}
		if err != nil {
			var ee *EnvError
			if !errors.As(err, &ee) {
				t.Fatalf("FromMap(%v) = %v, not an *EnvError", env, err)
			}
			return
		}
		bad := func(why string) { t.Fatalf("FromMap(%v) = %v: %s", env, j, why) }
		switch {
		case j.WorldSize < 1 || j.WorldSize > MaxWorldSize:
			bad("world size out of range")
		case j.Rank < 0 || j.Rank >= j.WorldSize:
			bad("rank not below the world size")
		case j.LocalWorldSize < 1 || j.LocalWorldSize > j.WorldSize:
			bad("local world size out of range")
		case j.LocalRank < 0 || j.LocalRank >= j.LocalWorldSize:
			bad("local rank not below the local world size")
		case j.NumNodes > 0 && (j.NodeRank >= j.NumNodes || j.NumNodes > j.WorldSize):
			bad("node rank or count out of range")
		case j.MasterPort < 0 || j.MasterPort > 65535:
			bad("master port out of range")
		case j.StoreAddr != "" && addrProblem(j.StoreAddr) != nil:
			bad("unusable store address")
		case strings.ContainsRune(j.String(), 0):
			bad("NUL in the description")
		}
	})
}
