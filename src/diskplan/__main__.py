from diskplan.cli.main import program

program()
