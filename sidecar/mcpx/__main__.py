from mcpx.cli.main import main

raise SystemExit(main())
