package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// noneYet is why a first start folds the whole log.
const noneYet = "there is none yet"

// private checks that the checkpoint at path, its folder and the folder
// above (the data folder) belong to this user and that nobody else may
// write them: what another user could plant there would be folded as if
// the log had said it.
func private(path string) error {
	dir := filepath.Dir(path)
	for _, c := range []struct {
		path string
		dir  bool
	}{{filepath.Dir(dir), true}, {dir, true}, {path, false}} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			return err
		}
		what, isType := "a regular file", fi.Mode().IsRegular()
		if c.dir {
			what, isType = "a folder", fi.IsDir()
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !isType:
			return fmt.Errorf("%s is not %s", c.path, what)
		case !ok:
			return fmt.Errorf("the owner of %s is not known on this system", c.path)
		case int(st.Uid) != os.Geteuid():
			return fmt.Errorf("%s belongs to uid %d, not to this user", c.path, st.Uid)
		case fi.Mode().Perm()&0o022 != 0:
			return fmt.Errorf("others may write %s (mode %#o); chmod go-w it", c.path, fi.Mode().Perm())
		}
	}
	return nil
}
