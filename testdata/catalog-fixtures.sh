#!/bin/sh
# catalog-fixtures.sh regenerates the example fixtures of the catalog's git and ffmpeg bundles
# (bundles/<id>/testdata/, run by `clihostctl test` and TestCatalogExamples). Run it from the
# repository's root. The git repository is built with fixed names and dates, so its objects (and
# the hashes the examples expect) are the same on every run (only dot-git/index, which holds the
# files' stat data, differs; git refreshes it); its .git folder is stored as dot-git,
# which `clihostctl test` copies back as .git (go:embed leaves out names starting with "."). No
# go.mod in it: go:embed refuses a folder holding one (another module).
set -eu
git_fixture() {
	dir=bundles/git/testdata
	rm -rf "$dir"
	mkdir -p "$dir"
	(
		cd "$dir"
		export GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent GIT_AUTHOR_NAME="Ada Example" GIT_AUTHOR_EMAIL=ada@example.com
		export GIT_COMMITTER_NAME="Ada Example" GIT_COMMITTER_EMAIL=ada@example.com TZ=UTC LC_ALL=C
		n=0
		commit() {
			n=$((n + 1))
			export GIT_AUTHOR_DATE="2024-01-0${n}T12:00:00Z" GIT_COMMITTER_DATE="2024-01-0${n}T12:00:00Z"
			git add -A && git commit -q --no-gpg-sign -m "$1"
		}
		git init -q -b main --template= .
		printf 'pager: src/main.go\n\tgo build -o pager ./src\n' >Makefile
		i=1
		{ echo "# pager"; echo; while [ $i -le 22 ]; do echo "Line $i of the pager's README."; i=$((i + 1)); done; } >README.md
		commit "Start the pager"
		mkdir -p src docs
		printf 'package main\n\nfunc main() {\n\tprintln("pager")\n}\n' >src/main.go
		commit "Add the main program"
		printf '# Usage\n\nTODO: document the flags.\n' >docs/usage.md
		commit "Document the usage"
		printf 'package main\n\nfunc main() {\n\tprintln("pager", 1)\n}\n' >src/main.go
		commit "Fix off-by-one in pager"
		git tag v1.0.0
		git branch feature/x
		git switch -q feature/x
		printf 'package main\n\nfunc scroll() {}\n' >src/scroll.go
		commit "Add scrolling"
		git switch -q main
		# The working tree: a staged change, an unstaged one and an untracked file.
		printf '\nSee docs/usage.md.\n' >>README.md
		git add README.md
		printf '# Usage\n\nTODO: document the flags.\nFIXME: and the keys.\n' >docs/usage.md
		printf 'package main\n' >src/notes.go
		rm -rf .git/hooks .git/info .git/logs .git/description .git/COMMIT_EDITMSG .git/ORIG_HEAD
		printf '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n' >.git/config
		mv .git dot-git
	)
}
ffmpeg_fixture() {
	dir=bundles/ffmpeg/testdata
	rm -rf "$dir"
	mkdir -p "$dir"
	# One second of a 64x48 test pattern and a 440 Hz tone, small and without metadata that changes.
	ffmpeg -hide_banner -loglevel error -nostdin -f lavfi -i testsrc=size=64x48:rate=5:duration=1 \
		-f lavfi -i sine=frequency=440:sample_rate=8000:duration=1 -c:v mpeg4 -q:v 10 -c:a aac -b:a 16k \
		-map_metadata -1 -fflags +bitexact -flags:v +bitexact -flags:a +bitexact "$dir/talk.mp4"
}
git_fixture
ffmpeg_fixture
