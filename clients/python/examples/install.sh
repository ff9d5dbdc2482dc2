pip install ./clients/python          # from a checkout, with psycopg-pool; writes nothing into it
