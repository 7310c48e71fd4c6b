package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func runEmuCmd(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	// Flag variables outlive a command run: start each from the defaults.
	for _, c := range []*cobra.Command{benchFabricCmd} {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			f.Value.Set(f.DefValue)
			f.Changed = false
		})
	}
	var out, errOut bytes.Buffer
	rootCmd.SetArgs(args)
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&errOut)
	defer func() { rootCmd.SetArgs(nil); rootCmd.SetOut(nil); rootCmd.SetErr(nil) }()
	err := rootCmd.Execute()
	return out.Bytes(), err
}

func TestBenchFabricJSON(t *testing.T) {
	out, err := runEmuCmd(t, "bench", "fabric", "--json", "--rtt", "10us", "--tags", "256", "--sizes", "64K,4M")
	if err != nil {
		t.Fatal(err)
	}
	var rep fabricReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.MMIOReadUs.Fabric-rep.MMIOReadUs.Native < 10 || len(rep.H2D) != 2 || rep.H2D[1].FabricGBps >= rep.H2D[1].NativeGBps {
		t.Fatalf("unexpected report %+v", rep)
	}
	// 256 tags x 512 B over a ~12us read round trip bounds H2D near 11 GB/s.
	if g := rep.H2D[1].FabricGBps; g > 11.5 || g < 8 {
		t.Fatalf("H2D 4 MiB over the fabric at 10us with 256 tags: %.2f GB/s", g)
	}
	if _, err := runEmuCmd(t, "bench", "fabric", "--sizes", "0"); err == nil {
		t.Fatal("size 0 accepted")
	}
}
