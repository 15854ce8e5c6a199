from diskplan.cli.main import main

raise SystemExit(main())
