package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// build builds REF and the work tree into the run's directory; it returns REF's commit and a
// description of the work tree (HEAD's commit, "+changes" when the tree differs from it).
func (ab *abRun) build(ctx context.Context, ref string) (refCommit, work string, err error) {
	root, err := gitOut(ctx, ab.o.repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", "", fmt.Errorf("bench ab: not in a git work tree (give -repo): %w", err)
	}
	if refCommit, err = gitOut(ctx, root, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
		return "", "", fmt.Errorf("bench ab: REF %q is not a commit of %s", ref, root)
	}
	head, err := gitOut(ctx, root, "rev-parse", "HEAD")
	if err != nil {
		return "", "", err
	}
	work = short(head)
	if status, err := gitOut(ctx, root, "status", "--porcelain", "--untracked-files=no"); err == nil && status != "" {
		work += "+changes"
	}
	src := filepath.Join(ab.tmp, "ref")
	if err := gitExtract(ctx, root, refCommit, src); err != nil {
		return "", "", fmt.Errorf("bench ab: extracting REF %s: %w", ref, err)
	}
	ab.builds[0] = abBuild{name: "ref", bin: filepath.Join(ab.tmp, "surge-ref")}
	ab.builds[1] = abBuild{name: "work", bin: filepath.Join(ab.tmp, "surge-work")}
	ab.out.printf("ab: building REF %s (%s) and the work tree %s …\n", ref, short(refCommit), root)
	if err := goBuild(ctx, src, ab.builds[0].bin); err != nil {
		return "", "", fmt.Errorf("bench ab: REF %s (%s) does not build; nothing was run:\n%w", ref, short(refCommit), err)
	}
	if err := goBuild(ctx, root, ab.builds[1].bin); err != nil {
		return "", "", fmt.Errorf("bench ab: the work tree %s does not build; nothing was run:\n%w", root, err)
	}
	return refCommit, work, nil
}

// goBuild builds dir's ./cmd/surge into bin. -trimpath: the two trees then share Go's build
// cache for every package they have in common, whatever their directories.
func goBuild(ctx context.Context, dir, bin string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/surge")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s%w", out, err)
	}
	return nil
}

// gitOut runs git in dir ("" for the current directory) and returns its trimmed output.
func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// gitExtract writes the tree of commit (git archive) into dir.
func gitExtract(ctx context.Context, repo, commit, dir string) error {
	cmd := exec.CommandContext(ctx, "git", "archive", "--format=tar", commit)
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	xerr := untar(stdout, dir)
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return xerr
}

// untar writes a tar stream's directories, files and symbolic links under dir; a name that
// would leave dir is refused.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("unsafe path %q in the archive", h.Name)
		}
		path := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFile(path, tr, os.FileMode(h.Mode).Perm())
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				err = os.Symlink(h.Linkname, path)
			}
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm|0o200)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}
